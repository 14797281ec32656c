"""The REST API of notifications: the inbox, preferences, webhook endpoints. Same services as the pages.

Another user's notification or endpoint is a 404 (every query is scoped to the caller). An endpoint's
``secret`` is in the answer to its creation only. A token scoped to a team reads the person's
inbox, preferences and endpoints but changes none of them, marking news read included (a 403
``team_token``).
"""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import mixins, permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from core.drf import PersonalTokenForChanges, ServiceError
from notifications import selectors, services
from notifications.models import Notification, WebhookEndpoint
from notifications.serializers import (
    DeliverySerializer,
    MarkReadSerializer,
    NotificationSerializer,
    PreferencesSerializer,
    UnreadQuerySerializer,
    WebhookEndpointCreatedSerializer,
    WebhookEndpointSerializer,
)
from notifications.throttles import WebhookTestThrottle

TAG = ["notifications"]
# Where a person's notifications go is theirs alone: a token scoped to a team reads it, never changes it.
PERSONAL_SETTINGS = [permissions.IsAuthenticated, PersonalTokenForChanges]


def _field_error(field: str, error: DjangoValidationError):
    raise ValidationError({field: error.messages}) from error


MARKED = inline_serializer("NotificationsMarked", {"marked": serializers.IntegerField()})


@extend_schema_view(
    list=extend_schema(
        summary="List your notifications, newest first",
        tags=TAG,
        parameters=[OpenApiParameter("unread", OpenApiTypes.BOOL, description="Only the unread ones.")],
    ),
    retrieve=extend_schema(summary="Get one notification", tags=TAG),
)
class NotificationViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    permission_classes = PERSONAL_SETTINGS  # the inbox is its person's: a team's token only reads it
    serializer_class = NotificationSerializer
    queryset = Notification.objects.none()  # the schema's types; get_queryset scopes to the caller
    lookup_value_regex = r"\d+"

    def get_queryset(self):
        unread = False
        if self.action == "list":
            query = UnreadQuerySerializer(data=self.request.query_params)
            query.is_valid(raise_exception=True)
            unread = query.validated_data["unread"]
        return selectors.notification_list_for(user=self.request.user, unread=unread)

    @extend_schema(summary="Mark one notification read", tags=TAG, request=None, responses=NotificationSerializer)
    @action(detail=True, methods=["post"])
    def read(self, request, pk=None):
        row = self.get_object()
        services.notifications_mark_read(user=request.user, ids=[row.pk])
        row.refresh_from_db()
        return Response(NotificationSerializer(row).data)

    @extend_schema(
        operation_id="notifications_read_many",
        summary="Mark several (ids) or all of your notifications read",
        tags=TAG,
        request=MarkReadSerializer,
        responses=MARKED,
    )
    @action(detail=False, methods=["post"], url_path="read")
    def read_all(self, request):
        body = MarkReadSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        ids = None if body.validated_data["all"] else body.validated_data["ids"]
        return Response({"marked": services.notifications_mark_read(user=request.user, ids=ids)})


class PreferencesView(APIView):
    """Which kinds go by e-mail and webhook (the inbox keeps them all)."""

    permission_classes = PERSONAL_SETTINGS

    def _answer(self, request) -> Response:
        rows = [
            {"kind": kind, "label": label, "inbox": True, "email": ch.email, "webhook": ch.webhook}
            for kind, label, ch in selectors.preference_table_for(user=request.user)
        ]
        return Response(PreferencesSerializer({"preferences": rows}).data)

    @extend_schema(summary="Your notification preferences", tags=TAG, responses=PreferencesSerializer)
    def get(self, request):
        return self._answer(request)

    @extend_schema(
        summary="Set notification preferences (the kinds given; others keep theirs)",
        tags=TAG,
        request=PreferencesSerializer,
        responses=PreferencesSerializer,
    )
    def put(self, request):
        body = PreferencesSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        choices = {
            row["kind"]: {"email": row["email"], "webhook": row["webhook"]}
            for row in body.validated_data["preferences"]
        }
        services.preferences_set(user=request.user, choices=choices)
        return self._answer(request)


@extend_schema_view(
    list=extend_schema(summary="List your webhook endpoints", tags=TAG),
    retrieve=extend_schema(summary="Get one webhook endpoint", tags=TAG),
    create=extend_schema(
        summary="Add a webhook endpoint (its secret is in this answer only)",
        tags=TAG,
        responses={
            201: WebhookEndpointCreatedSerializer,
            409: OpenApiResponse(description="limit_reached: you have the most endpoints allowed"),
        },
    ),
    partial_update=extend_schema(summary="Change an endpoint's URL or turn it on or off", tags=TAG),
    destroy=extend_schema(summary="Remove a webhook endpoint", tags=TAG),
)
class WebhookEndpointViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    permission_classes = PERSONAL_SETTINGS
    serializer_class = WebhookEndpointSerializer
    queryset = WebhookEndpoint.objects.none()  # the schema's types; get_queryset scopes to the caller
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self):
        return selectors.webhook_endpoint_list_for(user=self.request.user)

    def get_throttles(self):
        # A test event is work for a worker against the user's URL: limited per user besides the global limit.
        if self.action == "test":
            return [*super().get_throttles(), WebhookTestThrottle()]
        return super().get_throttles()

    def create(self, request, *args, **kwargs):
        body = WebhookEndpointSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            endpoint = services.webhook_endpoint_create(
                user=request.user, url=body.validated_data["url"], active=body.validated_data.get("active", True)
            )
        except DjangoValidationError as error:
            _field_error("url", error)
        except services.EndpointLimitReached as error:
            raise ServiceError(detail=str(error), code="limit_reached") from error
        return Response(WebhookEndpointCreatedSerializer(endpoint).data, status=status.HTTP_201_CREATED)

    def update(self, request, *args, **kwargs):
        endpoint = self.get_object()
        body = WebhookEndpointSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        try:
            services.webhook_endpoint_update(
                endpoint=endpoint, url=body.validated_data.get("url"), active=body.validated_data.get("active")
            )
        except DjangoValidationError as error:
            _field_error("url", error)
        return Response(WebhookEndpointSerializer(endpoint).data)

    def perform_destroy(self, instance):
        services.webhook_endpoint_delete(endpoint=instance)

    @extend_schema(
        summary="Send a test event to this endpoint", tags=TAG, request=None, responses={202: DeliverySerializer}
    )
    @action(detail=True, methods=["post"])
    def test(self, request, pk=None):
        delivery = services.webhook_test_send(endpoint=self.get_object())
        return Response(DeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(summary="This endpoint's recent deliveries", tags=TAG, responses=DeliverySerializer(many=True))
    @action(detail=True, methods=["get"])
    def deliveries(self, request, pk=None):
        endpoint = self.get_object()
        rows = endpoint.deliveries.order_by("-created_at", "-id")
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(DeliverySerializer(page, many=True).data)
