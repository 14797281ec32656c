"""REST endpoints for the account: profile, SSH keys, API tokens, the security log. They call the same
services as the pages."""

from __future__ import annotations

from datetime import timedelta

from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import generics, mixins, permissions, serializers, status, viewsets
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from accounts import selectors, services
from accounts.client import request_client
from accounts.models import APIToken, SecurityEvent, SSHKey, User
from accounts.serializers import (
    APITokenCreatedSerializer,
    APITokenCreateSerializer,
    APITokenSerializer,
    ProfileSerializer,
    RateLimitSerializer,
    SecurityEventSerializer,
    SSHKeyCreateSerializer,
    SSHKeySerializer,
    SSHKeyUpdateSerializer,
)
from accounts.throttles import rate_limit_status
from accounts.tokens import token_team_choices


def raise_as_api_error(error: DjangoValidationError):
    """A service's refusal as DRF's 400, field by field, keeping each message's code."""
    if hasattr(error, "error_dict"):
        detail = {
            field: [
                serializers.ErrorDetail(str(e.message % e.params if e.params else e.message), code=e.code or "invalid")
                for e in errors
            ]
            for field, errors in error.error_dict.items()
        }
    else:
        detail = [serializers.ErrorDetail(message, code="invalid") for message in error.messages]
    raise serializers.ValidationError(detail)


class PersonalCredentialsOnly(permissions.BasePermission):
    """A token scoped to a team acts for the team: it reads the account but changes none of its
    credentials (tokens, SSH keys, the profile), so a token handed to a team's CI cannot mint its maker
    a personal token or plant a key on their instances."""

    message = _("A token scoped to a team cannot change your account: use a personal token or the console.")
    code = "team_token"

    def has_permission(self, request, view) -> bool:
        if request.method in permissions.SAFE_METHODS:
            return True
        token = request.auth
        return not (isinstance(token, APIToken) and token.team_id is not None)


CREDENTIALS_PERMISSIONS = [permissions.IsAuthenticated, PersonalCredentialsOnly]


# --- Views ----------------------------------------------------------------------------------------


@extend_schema(tags=["account"], summary="Your rate limits and what is left of them this minute")
class RateLimitView(generics.GenericAPIView):
    """The calling credential's limits (the account's, the token's own) and what is left of each. This
    request counts, as any other; over a limit it is refused with 429 and ``Retry-After`` too."""

    serializer_class = RateLimitSerializer

    def get(self, request) -> Response:
        return Response(RateLimitSerializer(rate_limit_status(request)).data)


@extend_schema(tags=["account"])
class ProfileView(generics.RetrieveUpdateAPIView):
    permission_classes = CREDENTIALS_PERMISSIONS
    """The signed-in user's profile."""

    serializer_class = ProfileSerializer
    http_method_names = ["get", "patch", "head", "options"]

    def get_object(self) -> User:
        return self.request.user

    def perform_update(self, serializer: ProfileSerializer) -> None:
        display_name = serializer.validated_data.get("display_name", self.request.user.display_name)
        try:
            services.user_profile_update(
                user=self.request.user, display_name=display_name, language=serializer.validated_data.get("language")
            )
        except DjangoValidationError as error:
            raise_as_api_error(error)


@extend_schema_view(
    list=extend_schema(summary="List your SSH keys"),
    retrieve=extend_schema(summary="Get an SSH key"),
    create=extend_schema(
        summary="Add an SSH key",
        request=SSHKeyCreateSerializer,
        responses={201: SSHKeySerializer, 400: OpenApiResponse(description="The key was refused; see error.fields.")},
    ),
    partial_update=extend_schema(
        summary="Rename an SSH key", request=SSHKeyUpdateSerializer, responses=SSHKeySerializer
    ),
    destroy=extend_schema(summary="Delete an SSH key", responses={204: None}),
)
@extend_schema(tags=["account"])
class SSHKeyViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    permission_classes = CREDENTIALS_PERMISSIONS
    serializer_class = SSHKeySerializer
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    lookup_value_converter = "int"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no user
            return SSHKey.objects.none()
        return selectors.ssh_key_list_for(user=self.request.user)

    def create(self, request, *args, **kwargs) -> Response:
        data = SSHKeyCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            key = services.ssh_key_add(
                user=request.user,
                name=data.validated_data.get("name", ""),
                public_key=data.validated_data["public_key"],
                **request_client(request),
            )
        except DjangoValidationError as error:
            raise_as_api_error(error)
        return Response(SSHKeySerializer(key).data, status=status.HTTP_201_CREATED)

    def partial_update(self, request, *args, **kwargs) -> Response:
        key = self.get_object()
        data = SSHKeyUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            key = services.ssh_key_rename(key=key, name=data.validated_data["name"])
        except DjangoValidationError as error:
            raise_as_api_error(error)
        return Response(SSHKeySerializer(key).data)

    def destroy(self, request, *args, **kwargs) -> Response:
        key = self.get_object()
        services.ssh_key_delete(user=request.user, key_id=key.pk, **request_client(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema_view(
    list=extend_schema(summary="List your API tokens"),
    retrieve=extend_schema(summary="Get an API token (never its secret)"),
    create=extend_schema(
        summary="Create an API token",
        description="The response holds the raw token in `token`; it is never shown again.",
        request=APITokenCreateSerializer,
        responses={
            201: APITokenCreatedSerializer,
            404: OpenApiResponse(description="`team` names no team you are in."),
        },
    ),
    destroy=extend_schema(summary="Revoke an API token", responses={204: None}),
)
@extend_schema(tags=["account"])
class APITokenViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    permission_classes = CREDENTIALS_PERMISSIONS
    serializer_class = APITokenSerializer
    http_method_names = ["get", "post", "delete", "head", "options"]

    lookup_value_converter = "int"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no user
            return APIToken.objects.none()
        return selectors.api_token_list_for(user=self.request.user)

    def create(self, request, *args, **kwargs) -> Response:
        data = APITokenCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        days = data.validated_data.get("expires_in_days")
        expires_at = timezone.now() + timedelta(days=days) if days else None
        team_id = None
        if data.validated_data.get("team"):
            slug = data.validated_data["team"]
            team_id = next((t["id"] for t in token_team_choices(user=request.user) if t["slug"] == slug), None)
            if team_id is None:  # another's team, or none: not found, as every other account's object
                raise NotFound(_("You are not in a team with this slug."))
        try:
            token, raw = services.api_token_create(
                user=request.user,
                name=data.validated_data["name"],
                expires_at=expires_at,
                scope=data.validated_data["scope"],
                team_id=team_id,
                rate_per_min=data.validated_data.get("rate_per_min"),
                **request_client(request),
            )
        except DjangoValidationError as error:
            raise_as_api_error(error)
        body = {**APITokenSerializer(token).data, "token": raw}
        response = Response(body, status=status.HTTP_201_CREATED)
        response["Cache-Control"] = "no-store"
        return response

    def destroy(self, request, *args, **kwargs) -> Response:
        services.api_token_revoke(token=self.get_object(), **request_client(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema_view(list=extend_schema(summary="List your security log (newest first)"))
@extend_schema(tags=["account"])
class SecurityEventViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """Your own security log: log-ins, refused log-ins, password, e-mail, SSH key and token changes."""

    serializer_class = SecurityEventSerializer
    http_method_names = ["get", "head", "options"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no user
            return SecurityEvent.objects.none()
        return selectors.security_event_list_for(user=self.request.user)
