"""The staff's REST API for instances: the quota review queue and reserved capacity.

Staff only (``IsAdminUser``); the same services as the staff pages, the same errors as the users' API.
"""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAdminUser
from rest_framework.response import Response

from instances import errors, quota, selectors
from instances.api import raise_as_api_error
from instances.capacity import reservations
from instances.models import QuotaRequest, Reservation
from instances.serializers import (
    StaffQuotaApproveSerializer,
    StaffQuotaDenySerializer,
    StaffQuotaListQuery,
    StaffQuotaRequestSerializer,
    StaffReservationCreateSerializer,
    StaffReservationListQuery,
    StaffReservationSerializer,
)

_staff_decision_responses = {
    200: StaffQuotaRequestSerializer,
    409: OpenApiResponse(description=_("invalid_state: the request was already decided")),
}


@extend_schema_view(
    list=extend_schema(
        summary="Quota requests (staff): the waiting queue, most urgent first, or all",
        tags=["staff"],
        parameters=[StaffQuotaListQuery],
    ),
    retrieve=extend_schema(summary="One quota request (staff)", tags=["staff"]),
)
class StaffQuotaRequestViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Staff decide quota requests here as on the review page: the same services, the same checks, the
    same e-mails and audit rows. Anyone else is refused (403) before any row is read."""

    serializer_class = StaffQuotaRequestSerializer
    permission_classes = [IsAdminUser]

    def get_queryset(self):
        queryset = QuotaRequest.objects.select_related("user", "gpu_model", "decided_by")
        if self.action != "list":
            return queryset
        query = StaffQuotaListQuery(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        wanted = query.validated_data["status"]
        if wanted == QuotaRequest.Status.PENDING:
            # One SLA for all: the oldest request has the earliest deadline.
            return queryset.filter(status=wanted).order_by("created_at", "id")
        if wanted != "all":
            queryset = queryset.filter(status=wanted)
        return queryset.order_by("-created_at", "-id")

    def _decided(self, request: QuotaRequest) -> Response:
        fresh = QuotaRequest.objects.select_related("user", "gpu_model", "decided_by").get(pk=request.pk)
        return Response(StaffQuotaRequestSerializer(fresh).data)

    @extend_schema(
        summary="Approve a quota request (staff)",
        tags=["staff"],
        request=StaffQuotaApproveSerializer,
        responses=_staff_decision_responses,
    )
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        target = self.get_object()
        body = StaffQuotaApproveSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            decided = quota.quota_request_approve(
                request_id=target.pk,
                staff=request.user,
                cards=data.get("cards"),
                days=data.get("days"),
                message=data["message"],
                reserve_region=data["reserve_region"],
                reserve_starts_at=data["reserve_starts_at"],
                reserve_ends_at=data["reserve_ends_at"],
            )
        except errors.InstanceError as exc:
            raise_as_api_error(exc)
        return self._decided(decided)

    @extend_schema(
        summary="Decline a quota request with a reason (staff)",
        tags=["staff"],
        request=StaffQuotaDenySerializer,
        responses=_staff_decision_responses,
    )
    @action(detail=True, methods=["post"])
    def deny(self, request, pk=None):
        target = self.get_object()
        body = StaffQuotaDenySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            decided = quota.quota_request_deny(
                request_id=target.pk, staff=request.user, message=body.validated_data["message"]
            )
        except errors.InstanceError as exc:
            raise_as_api_error(exc)
        return self._decided(decided)


@extend_schema_view(
    list=extend_schema(summary="Reservations (staff)", tags=["staff"], parameters=[StaffReservationListQuery]),
    retrieve=extend_schema(summary="One reservation (staff)", tags=["staff"]),
    create=extend_schema(
        summary="Reserve cards for an account (staff)",
        tags=["staff"],
        request=StaffReservationCreateSerializer,
        responses={201: StaffReservationSerializer},
    ),
)
class StaffReservationViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    """Staff grant, list and cancel reserved capacity here as on the staff page: the same services."""

    serializer_class = StaffReservationSerializer
    permission_classes = [IsAdminUser]
    lookup_value_regex = r"\d+"

    def get_queryset(self):
        return Reservation.objects.select_related("account", "account__team", "region", "gpu_model", "created_by")

    def list(self, request, *args, **kwargs):
        query = StaffReservationListQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        page = self.paginate_queryset(selectors.reservations_staff_list(status=query.validated_data["status"]))
        return self.get_paginated_response(StaffReservationSerializer(page, many=True).data)

    def _one(self, pk) -> Response:
        found = selectors.reservations_staff_list_by_pk(pk=pk)
        return Response(StaffReservationSerializer(found).data)

    def retrieve(self, request, *args, **kwargs):
        return self._one(self.get_object().pk)

    def create(self, request, *args, **kwargs):
        body = StaffReservationCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            created = reservations.reservation_create(staff=request.user, **body.validated_data)
        except errors.InstanceError as exc:
            raise_as_api_error(exc)
        response = self._one(created.pk)
        response.status_code = status.HTTP_201_CREATED
        return response

    @extend_schema(
        summary="Cancel a reservation now (staff)",
        tags=["staff"],
        request=None,
        responses={
            200: StaffReservationSerializer,
            409: OpenApiResponse(description=_("invalid_state: the reservation has already ended")),
        },
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        target = self.get_object()
        try:
            reservations.reservation_cancel(reservation_id=target.pk, staff=request.user)
        except errors.InstanceError as exc:
            raise_as_api_error(exc)
        return self._one(target.pk)
