"""The REST API for secrets, in the acting context (a team's secrets with a token scoped to it or a
session acting in it; one's own otherwise). Same services and refusals as the page.

- ``GET /api/v1/secrets/``: names, sizes and dates, never values.
- ``POST /api/v1/secrets/`` ``{"name", "value"}``: a new secret (409 ``secret_exists`` when the name is
  taken: replacing is the PUT).
- ``PUT /api/v1/secrets/<NAME>/`` ``{"value"}``: a new value for a saved secret (404 for a name not saved).
- ``DELETE /api/v1/secrets/<NAME>/``: 204; the instances that had it boot without it from their next start.

A bad name or value is a 400 with ``fields``; another account's secret is a 404 whatever the
credential. In a team: seeing the names needs a role that sees resources; saving needs one that may
launch, and replacing or deleting a secret another member saved needs an admin (a 403 saying why).
"""

from __future__ import annotations

from django.http import Http404
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from core.drf import ServiceError
from core.errors import Refusal
from teams.access import request_acting, require_permission
from teams.resource_api import TeamResourceViewSet
from teams.roles import Permission
from vault import selectors, services
from vault.errors import CredentialInvalid, SecretInvalid
from vault.models import NAME_RE
from vault.serializers import (
    RegistryCredentialCreateSerializer,
    RegistryCredentialSerializer,
    RegistryCredentialUpdateSerializer,
    SecretCreateSerializer,
    SecretSerializer,
    SecretValueSerializer,
)


def _raise(exc: Refusal):
    if isinstance(exc, SecretInvalid | CredentialInvalid):
        raise ValidationError({exc.field or "non_field_errors": [exc.message]}) from exc
    raise ServiceError(detail=exc.message, code=exc.code) from exc


def _may_save(request) -> None:
    require_permission(request, Permission.RESOURCES_LAUNCH, _("Your role in this team does not allow saving secrets."))


_refused = OpenApiResponse(description="secret_exists or secrets_limit")


class _VaultViewSet(mixins.DestroyModelMixin, TeamResourceViewSet):
    """The write actions secrets and registry credentials share: a create that refuses a key already
    saved (the PUT replaces), a replace of the saved one's value(s), and a delete; each needs a role
    that may launch (``_may_save``). A subclass names its serializers, its two services and ``key``,
    the field that names one (kept from the saved row on a replace)."""

    create_serializer: type
    update_serializer: type
    key: str

    def _set(self, **fields):
        raise NotImplementedError

    def _delete(self, obj, actor) -> None:
        raise NotImplementedError

    def _save(self, request, fields: dict, *, created: bool) -> Response:
        try:
            obj, _created = self._set(owner=request_acting(request)[0], actor=request.user, **fields)
        except Refusal as exc:
            _raise(exc)
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(self.serializer_class(obj).data, status=code)

    def create(self, request, *args, **kwargs):
        _may_save(request)
        body = self.create_serializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._save(request, {**body.validated_data, "create_only": True}, created=True)

    def update(self, request, *args, **kwargs):
        _may_save(request)
        saved = self.get_object(operate=True)  # 404 for one the acting account has not saved
        body = self.update_serializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._save(request, {**body.validated_data, self.key: getattr(saved, self.key)}, created=False)

    def destroy(self, request, *args, **kwargs):
        _may_save(request)
        self._delete(self.get_object(operate=True), request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


# No Idempotency-Key on the create: the idempotency table keeps a digest of each body, and a digest of a
# low-entropy value can be checked against guesses. A repeated create is harmless anyway: the second one
# is a 409 ``secret_exists`` and changes nothing.
@extend_schema_view(
    list=extend_schema(summary="List your secrets (names and dates, never values)", tags=["secrets"]),
    retrieve=extend_schema(summary="Get one secret's name and dates (never its value)", tags=["secrets"]),
    create=extend_schema(
        summary="Save a new secret",
        tags=["secrets"],
        request=SecretCreateSerializer,
        responses={201: SecretSerializer, 400: OpenApiResponse(description="Invalid name or value"), 409: _refused},
    ),
    destroy=extend_schema(
        summary="Delete a secret", tags=["secrets"], responses={204: OpenApiResponse(description="Deleted")}
    ),
)
class SecretViewSet(_VaultViewSet):
    serializer_class = SecretSerializer
    create_serializer = SecretCreateSerializer
    update_serializer = SecretValueSerializer
    key = "name"
    lookup_field = "name"
    lookup_value_regex = "[^/]+"  # a name no secret can have is a JSON 404 from the view, as a missing one
    change_refused = gettext_lazy("Only the secret's creator or a team admin can change it.")

    def resources_for(self, principal):
        return selectors.secret_list_for(owner=principal)

    def get_object(self, *, operate: bool = False):
        if not NAME_RE.match(self.kwargs.get(self.lookup_field, "")):
            raise Http404  # no secret has such a name (and a NUL never reaches the database)
        return super().get_object(operate=operate)

    def _set(self, **fields):
        return services.secret_set(**fields)

    def _delete(self, obj, actor) -> None:
        services.secret_delete(secret=obj, actor=actor)

    @extend_schema(
        summary="Replace a secret's value",
        tags=["secrets"],
        request=SecretValueSerializer,
        responses={200: SecretSerializer, 400: OpenApiResponse(description="Invalid value")},
    )
    def update(self, request, *args, **kwargs):
        return super().update(request, *args, **kwargs)


@extend_schema_view(
    list=extend_schema(
        summary="List your registry credentials (hosts and user names, never passwords)", tags=["images"]
    ),
    retrieve=extend_schema(summary="Get one registry credential (never its password)", tags=["images"]),
    create=extend_schema(
        summary="Save how you log in to a private registry",
        tags=["images"],
        request=RegistryCredentialCreateSerializer,
        responses={
            201: RegistryCredentialSerializer,
            400: OpenApiResponse(description="Invalid host, user name or password"),
            409: OpenApiResponse(description="credential_exists or secrets_limit"),
        },
    ),
    destroy=extend_schema(
        summary="Delete a registry credential", tags=["images"], responses={204: OpenApiResponse(description="Deleted")}
    ),
)
class RegistryCredentialViewSet(_VaultViewSet):
    # The acting account's logins to private registries (``/api/v1/registry-credentials/``), for
    # importing and pulling its own images: host and user name shown, the password never. Another
    # account's is a 404 whatever the credential; saving needs a role that may launch, and replacing or
    # deleting another member's needs an admin (a 403).
    serializer_class = RegistryCredentialSerializer
    create_serializer = RegistryCredentialCreateSerializer
    update_serializer = RegistryCredentialUpdateSerializer
    key = "host"
    change_refused = gettext_lazy("Only the credential's creator or a team admin can change it.")

    def resources_for(self, principal):
        return selectors.registry_credential_list_for(owner=principal)

    def _set(self, **fields):
        return services.registry_credential_set(**fields)

    def _delete(self, obj, actor) -> None:
        services.registry_credential_delete(credential=obj, actor=actor)

    @extend_schema(
        summary="Replace a registry credential's user name and password",
        tags=["images"],
        request=RegistryCredentialUpdateSerializer,
        responses={
            200: RegistryCredentialSerializer,
            400: OpenApiResponse(description="Invalid user name or password"),
        },
    )
    def update(self, request, *args, **kwargs):
        return super().update(request, *args, **kwargs)
