"""The REST API for instances, the catalogue and GPU quota. Same services, same errors as the pages.

Domain refusals map to the console's error format: a field problem is a 400 with ``fields``; a
business refusal is a 409 whose ``code`` says which (``no_capacity``, ``quota_exceeded``,
``insufficient_funds``, ``invalid_state``).
"""

from __future__ import annotations

from django.db.models import Prefetch
from django.http import Http404, HttpResponse
from django.utils.translation import gettext_lazy as _
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.models import SSHKey
from core.drf import ServiceError
from idempotency.decorators import IDEMPOTENCY_KEY_PARAMETER, idempotent
from instances import errors, quota, selectors, services, tasks
from instances.acting import acting, require_launch, require_operate, require_quota_request, require_view
from instances.capacity import resize, start_queue
from instances.filters import InstanceFilter
from instances.images import image_access, images_saved_for
from instances.models import GpuModel, Image, QuotaRequest, Reservation, Snapshot, SnapshotSchedule
from instances.serializers import (
    AutoStopSerializer,
    CloneSerializer,
    EventSerializer,
    ExperimentRunSerializer,
    GpuModelSerializer,
    ImageBuildSerializer,
    ImageImportSerializer,
    ImageRenameSerializer,
    ImageSaveSerializer,
    ImageSerializer,
    ImageShareSerializer,
    InstanceSecretChoiceSerializer,
    InstanceSecretsSerializer,
    InstanceSerializer,
    InstanceStartSerializer,
    LaunchSerializer,
    QuotaRequestSerializer,
    RegionSerializer,
    RenameSerializer,
    ReservationSerializer,
    ResizeSerializer,
    SavedImageSerializer,
    SnapshotCreateSerializer,
    SnapshotScheduleSerializer,
    SnapshotSerializer,
)
from teams.access import Access
from teams.resource_api import TeamResourceViewSet, resource_schema


class ImageImportError(APIException):
    """An import refused by what the registry said (or the operator's list): the refusal's own status;
    a 503 carries ``Retry-After`` (DRF's handler writes ``wait``)."""

    def __init__(self, exc: errors.ImageImportRefused) -> None:
        super().__init__(detail=exc.message, code=exc.code)
        self.status_code = exc.status
        self.wait = exc.retry_after


def raise_as_api_error(exc: errors.InstanceError):
    """A service's refusal as the API answers it: 403, a 400 naming the field, or a 409 with its code."""
    if isinstance(exc, errors.ImageImportRefused):
        raise ImageImportError(exc) from exc
    if isinstance(exc, errors.NotPermitted):
        raise PermissionDenied(detail=exc.message, code=exc.code) from exc
    if isinstance(exc, errors.LaunchInvalid | errors.QuotaRequestInvalid | errors.ReservationInvalid):
        raise ValidationError({exc.field or "non_field_errors": [exc.message]}) from exc
    raise ServiceError(detail=exc.message, code=exc.code) from exc


# The columns the list reads: what InstanceSerializer shows, nothing more.
LIST_FIELDS = (
    "id",
    "name",
    "status",
    "status_reason",
    "region__slug",
    "gpu_model__slug",
    "image__slug",
    "gpu_count",
    "node_count",
    "disk_gb",
    "hourly_price_fen",
    "tier",
    "auto_stop_at",
    "auto_stop_idle_minutes",
    "created_at",
    "status_changed_at",
    "running_since",
    "owner_id",
    "entry_points",  # saved by the worker: the list asks no provider
    "entry_points_at",
    "image_ref",
    "boot_stages",  # the launch timeline, as the worker recorded it
    "boot_pull",
    "start_queued_at",  # and, only for an instance in line, one count for its place (queue_position)
    "no_gpu",
)


# --- Views ----------------------------------------------------------------------------------------------------

#: A launch's business refusals, as an instance's create and a deployment's answer them.
LAUNCH_REFUSED = OpenApiResponse(description="no_capacity, quota_exceeded or insufficient_funds")
_action_response = {200: InstanceSerializer, 409: OpenApiResponse(description=_("Not allowed in this state"))}


@resource_schema(
    tag="instances",
    noun="instance",
    nouns="instances",
    create={
        "summary": "Launch an instance",
        "request": LaunchSerializer,
        "responses": {
            201: InstanceSerializer,
            400: OpenApiResponse(description=_("Invalid choice")),
            409: LAUNCH_REFUSED,
        },
    },
)
class InstanceViewSet(TeamResourceViewSet):
    serializer_class = InstanceSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = InstanceFilter

    def view_required(self) -> None:
        try:
            require_view(self.request)  # a billing viewer sees none of the team's instances
        except errors.NotPermitted as exc:
            raise_as_api_error(exc)

    def get_object(self):
        # Seen by any member who sees the team's instances; _act asks require_operate for a change.
        return super(TeamResourceViewSet, self).get_object()

    def resources_for(self, principal):
        released = self.request.query_params.get("released", "").lower() in {"1", "true"}
        include_released = released or self.action != "list"
        qs = selectors.instance_list_for(user=principal, include_released=include_released)
        if self.action == "list":
            # Only what the representation reads: the joined models' slugs, not their every column.
            qs = qs.only(*LIST_FIELDS)
        return qs.prefetch_related(Prefetch("ssh_keys", queryset=SSHKey.objects.only("pk")))

    @idempotent
    def create(self, request, *args, **kwargs):
        launch = LaunchSerializer(data=request.data, context={"request": request})
        launch.is_valid(raise_exception=True)
        data = dict(launch.validated_data)
        data["volumes"] = [(v["volume"], v["mount_path"], v["mode"]) for v in data.pop("volumes", [])]
        data["secrets"] = [(s["name"], s["env"]) for s in data.pop("secrets", [])]
        principal, _membership = acting(request)
        try:
            require_launch(request)
            instance = services.instance_launch(services.LaunchRequest(user=principal, actor=request.user, **data))
        except errors.InstanceError as exc:
            raise_as_api_error(exc)
        # Its keys are the ones it was launched with, in the model's order: no query to read them back.
        keys = sorted(data.get("ssh_keys") or (), key=lambda k: (k.created_at, k.pk), reverse=True)
        context = {**self.get_serializer_context(), "ssh_key_ids": [k.pk for k in keys]}
        return Response(InstanceSerializer(instance, context=context).data, status=status.HTTP_201_CREATED)

    def _act(self, verb, **kwargs):
        instance = self.get_object()
        try:
            require_operate(self.request, instance)  # another member's: seen, not operated (403)
            instance = verb(instance=instance, **kwargs)
        except errors.InstanceError as exc:
            raise_as_api_error(exc)
        return Response(InstanceSerializer(instance, context=self.get_serializer_context()).data)

    @extend_schema(
        summary="Start a stopped instance: with its cards, without GPU, or waiting in line for cards",
        description=(
            "Starts it now when cards, quota and balance allow (200). With `no_gpu: true` it starts without "
            "cards (no-GPU mode: the same disk and image, a small CPU/RAM allowance, the no-GPU price). With "
            "`wait: true`, a start that finds no free cards puts the instance in line instead (202, still "
            "`stopped`, with `start_queued_at` and `queue_position`): it starts by itself when cards free up, "
            "first come first served per region and GPU model, and the owner is notified. Asking again while "
            "in line keeps its place. With `no_gpu`, `wait` is moot: a start without GPU takes no cards."
        ),
        tags=["instances"],
        request=InstanceStartSerializer,
        responses={
            200: InstanceSerializer,
            202: OpenApiResponse(InstanceSerializer, description=_("No free cards now: waiting in line")),
            400: OpenApiResponse(description=_("Invalid body")),
            403: OpenApiResponse(description="forbidden: a teammate's instance this person may see but not operate"),
            409: OpenApiResponse(
                description="invalid_state (cannot start from its status; no_gpu only from stopped), "
                "no_gpu_not_supported (no_gpu asked of a cluster), no_capacity (without wait), quota_exceeded "
                "and member_limit_reached (cards: not for no_gpu), insufficient_funds (the balance, at the "
                "no-GPU price for no_gpu) or budget_reached"
            ),
        },
    )
    @action(detail=True, methods=["post"])
    def start(self, request, pk=None):
        body = InstanceStartSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        if body.validated_data["no_gpu"] or not body.validated_data["wait"]:  # a start without GPU never waits
            return self._act(services.instance_start, actor=request.user, no_gpu=body.validated_data["no_gpu"])
        response = self._act(start_queue.instance_start_or_wait, actor=request.user)
        if response.data["start_queued_at"] is not None:
            response.status_code = status.HTTP_202_ACCEPTED
        return response

    @extend_schema(
        summary="Leave the line of starts waiting for cards",
        description="The instance stays as it is (stopped) and no longer starts by itself. Leaving twice is harmless.",
        tags=["instances"],
        request=None,
        responses=_action_response,
    )
    @action(detail=True, methods=["post"], url_path="leave-queue")
    def leave_queue(self, request, pk=None):
        return self._act(start_queue.instance_start_queue_leave)

    @extend_schema(summary="Stop (GPUs freed, disk kept)", tags=["instances"], request=None, responses=_action_response)
    @action(detail=True, methods=["post"])
    def stop(self, request, pk=None):
        return self._act(services.instance_stop, actor=request.user)

    @extend_schema(summary="Restart in place", tags=["instances"], request=None, responses=_action_response)
    @action(detail=True, methods=["post"])
    def restart(self, request, pk=None):
        return self._act(services.instance_restart, actor=request.user)

    @extend_schema(
        summary="Release (destroy with its disk)", tags=["instances"], request=None, responses=_action_response
    )
    @action(detail=True, methods=["post"])
    def release(self, request, pk=None):
        return self._act(services.instance_release, actor=request.user)

    @extend_schema(
        summary="Resize a running cluster by whole nodes",
        tags=["instances"],
        request=ResizeSerializer,
        responses={
            **_action_response,
            400: OpenApiResponse(description=_("Invalid size")),
            409: OpenApiResponse(
                description="resize_not_supported, resize_refused, no_capacity, quota_exceeded, "
                "insufficient_funds or invalid_state"
            ),
        },
    )
    @action(detail=True, methods=["post"])
    def resize(self, request, pk=None):
        body = ResizeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._act(resize.instance_resize, node_count=body.validated_data["node_count"], actor=request.user)

    @extend_schema(summary="Rename", tags=["instances"], request=RenameSerializer, responses=_action_response)
    @action(detail=True, methods=["post"])
    def rename(self, request, pk=None):
        body = RenameSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._act(services.instance_rename, name=body.validated_data["name"])

    @extend_schema(
        summary="Save as image",
        description=(
            "Save the instance (running or stopped) as an image of its account: the system as it is now "
            "(installed packages, files outside /home/user and volumes), never the console's tokens or keys. "
            "Answered at once with the image SAVING; it is READY (billed per GB-day) when pushed."
        ),
        tags=["images"],
        request=ImageSaveSerializer,
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        responses={
            202: SavedImageSerializer,
            409: OpenApiResponse(description="invalid_state, image_exists or image_save_not_supported"),
        },
    )
    @action(detail=True, methods=["post"], url_path="save-image")
    @idempotent  # a retried save (same Idempotency-Key) answers the first image, never a second one
    def save_image(self, request, pk=None):
        instance = self.get_object()  # a stranger's is a 404 before its body is read
        try:
            require_operate(request, instance)
            body = ImageSaveSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            image = services.image_save(instance=instance, actor=request.user, **body.validated_data)
        except errors.InstanceError as exc:
            raise_as_api_error(exc)
        return Response(SavedImageSerializer(image).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        methods=["GET"],
        summary="List the instance's snapshots",
        tags=["snapshots"],
        responses={200: SnapshotSerializer(many=True)},
    )
    @extend_schema(
        methods=["POST"],
        summary="Snapshot the instance's disk",
        description=(
            "Copy the instance's disk (/home/user; running or stopped) as a snapshot. Answered at once with "
            "the snapshot `creating` (its `progress` follows the copy); it is `ready` (billed per GB-day) "
            "when copied. Volumes are not in it."
        ),
        tags=["snapshots"],
        request=SnapshotCreateSerializer,
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        responses={
            202: SnapshotSerializer,
            409: OpenApiResponse(
                description="invalid_state, snapshot_limit_reached or snapshots_not_supported (a Kubernetes "
                "cluster without the volume snapshot API)"
            ),
        },
    )
    @action(detail=True, methods=["get", "post"], url_path="snapshots", filter_backends=[], pagination_class=None)
    @idempotent  # a retried create (same Idempotency-Key) answers the first snapshot, never a second one
    def snapshots(self, request, pk=None):
        instance = self.get_object()  # a stranger's is a 404 before its body is read
        if request.method == "GET":
            rows = instance.snapshots.filter(status__in=Snapshot.LIVE).select_related("created_by")
            return Response(SnapshotSerializer(rows, many=True).data)
        try:
            require_operate(request, instance)
            body = SnapshotCreateSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            snapshot = services.snapshot_create(
                instance=instance, actor=request.user, label=body.validated_data["name"]
            )
        except errors.InstanceError as exc:
            raise_as_api_error(exc)
        snapshot.refresh_from_db()  # eager workers (tests) may have finished it already
        return Response(SnapshotSerializer(snapshot).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        methods=["POST"],
        summary="Set or clear the instance's snapshot schedule",
        description="A snapshot every `every_hours` hours, keeping the newest `keep` scheduled ones (manual "
        "snapshots are never deleted by it). `every_hours` 0 or null turns it off.",
        tags=["snapshots"],
        request=SnapshotScheduleSerializer,
        responses={200: SnapshotScheduleSerializer, 409: OpenApiResponse(description="snapshots_not_supported")},
    )
    @extend_schema(
        methods=["GET"],
        summary="The instance's snapshot schedule",
        tags=["snapshots"],
        responses={200: SnapshotScheduleSerializer},
    )
    @action(
        detail=True, methods=["get", "post"], url_path="snapshot-schedule", filter_backends=[], pagination_class=None
    )
    def snapshot_schedule(self, request, pk=None):
        instance = self.get_object()
        schedule = SnapshotSchedule.objects.filter(instance=instance).first()
        if request.method == "POST":
            body = SnapshotScheduleSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            try:
                require_operate(request, instance)
                schedule = services.snapshot_schedule_set(
                    instance=instance, every_hours=body.validated_data["every_hours"], keep=body.validated_data["keep"]
                )
            except errors.InstanceError as exc:
                raise_as_api_error(exc)
        data = (
            {"every_hours": schedule.every_hours, "keep": schedule.keep, "next_at": schedule.next_at}
            if schedule
            else {"every_hours": None, "keep": 1, "next_at": None}
        )
        return Response(SnapshotScheduleSerializer(data).data)

    @extend_schema(
        summary="Clone: a new instance with this one's image and a copy of its disk",
        description=(
            "Launches a new instance in the same region, of the same GPU model and count and the same image "
            "(the digest this one runs), whose disk starts as a copy of `snapshot` (a ready snapshot of this "
            "instance) or of a snapshot taken now. Priced and billed like a launch (`hourly_price_fen`)."
        ),
        tags=["snapshots"],
        request=CloneSerializer,
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        responses={201: InstanceSerializer, 409: LAUNCH_REFUSED},
    )
    @action(detail=True, methods=["post"], filter_backends=[])
    @idempotent
    def clone(self, request, pk=None):
        instance = self.get_object()
        try:
            require_operate(request, instance)
            require_launch(request)
            body = CloneSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            snapshot = None
            if body.validated_data["snapshot"]:
                snapshot = instance.snapshots.filter(slug=body.validated_data["snapshot"]).first()
                if snapshot is None:
                    raise ValidationError({"snapshot": [_("No such snapshot of this instance.")]})
            clone = services.instance_clone(
                instance=instance, actor=request.user, name=body.validated_data["name"], snapshot=snapshot
            )
        except errors.InstanceError as exc:
            raise_as_api_error(exc)
        clone.refresh_from_db()
        return Response(
            InstanceSerializer(clone, context=self.get_serializer_context()).data, status=status.HTTP_201_CREATED
        )

    @extend_schema(
        summary="The W&B runs a running instance started, newest first",
        description="Read from what the console's hook in the image records when a program calls "
        "`wandb.init` (the local backend; other providers answer an empty list). Empty while it does not run.",
        tags=["instances"],
        responses=ExperimentRunSerializer(many=True),
    )
    @action(detail=True, methods=["get"], url_path="runs", filter_backends=[], pagination_class=None)
    def runs(self, request, pk=None):
        instance = self.get_object()  # a stranger's is a 404
        return Response(ExperimentRunSerializer(selectors.instance_experiment_runs(instance), many=True).data)

    @extend_schema(
        summary="Set or clear auto-stop", tags=["instances"], request=AutoStopSerializer, responses=_action_response
    )
    @action(detail=True, methods=["post"], url_path="auto-stop")
    def auto_stop(self, request, pk=None):
        body = AutoStopSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._act(
            services.instance_auto_stop_set,
            at=body.validated_data.get("at"),
            idle_minutes=body.validated_data.get("idle_minutes"),
        )

    @extend_schema(
        summary="Keep running: restart the idle clock of auto-stop",
        tags=["instances"],
        request=None,
        responses=_action_response,
    )
    @action(detail=True, methods=["post"], url_path="keep-running")
    def keep_running(self, request, pk=None):
        return self._act(services.instance_auto_stop_snooze)

    @extend_schema(
        methods=["GET"],
        summary="The secrets the instance gets at boot (names and whether each is a variable; never values)",
        tags=["instances"],
        responses=InstanceSecretChoiceSerializer(many=True),
    )
    @extend_schema(
        methods=["PUT"],
        summary="Choose the secrets the instance gets, from its next start or restart",
        description=(
            "Replaces the choice: each of the owner's secrets by name, with `env` to export it as an "
            "environment variable too. A machine reads its secrets as it boots: a stopped instance gets them "
            "at its start, a running one at its next restart. Another account's secret does not exist here."
        ),
        tags=["instances"],
        request=InstanceSecretsSerializer,
        responses={
            200: InstanceSecretChoiceSerializer(many=True),
            400: OpenApiResponse(description=_("Invalid choice")),
            403: OpenApiResponse(description="forbidden: a teammate's instance this person may see but not operate"),
            409: OpenApiResponse(description="invalid_state (released)"),
        },
    )
    @action(detail=True, methods=["get", "put"], filter_backends=[], pagination_class=None)
    def secrets(self, request, pk=None):
        instance = self.get_object()
        if request.method == "PUT":
            try:
                require_operate(request, instance)  # before the body: a teammate's instance is a 403 whatever it says
            except errors.InstanceError as exc:
                raise_as_api_error(exc)
            body = InstanceSecretsSerializer(data=request.data, context={"request": request})
            body.is_valid(raise_exception=True)
            choices = [(c["name"], c["env"]) for c in body.validated_data["secrets"]]
            try:
                services.instance_secrets_set(instance=instance, choices=choices)
            except errors.InstanceError as exc:
                raise_as_api_error(exc)
        chosen = selectors.instance_secret_choices(instance=instance)
        return Response(InstanceSecretChoiceSerializer(chosen, many=True).data)

    @extend_schema(summary="Status history, oldest first", tags=["instances"], responses=EventSerializer(many=True))
    # Paginated like every list (the schema says so); the instance list's filters do not apply to it.
    @action(detail=True, methods=["get"], filter_backends=[])
    def events(self, request, pk=None):
        instance = self.get_object()
        page = self.paginate_queryset(selectors.instance_events(instance=instance))
        return self.get_paginated_response(EventSerializer(page, many=True).data)


class CatalogueView(APIView):
    @extend_schema(
        summary="GPU models (with free cards now and prices), images and regions",
        tags=["catalogue"],
        responses=inline_serializer(
            "Catalogue",
            {
                "gpu_models": GpuModelSerializer(many=True),
                "images": ImageSerializer(many=True),
                "regions": RegionSerializer(many=True),
            },
        ),
    )
    def get(self, request):
        tasks.nodes_ensure_soon()
        offered = list(selectors.regions_offered())
        regions = {r.pk: r.slug for r in offered}
        context = {"capacity": selectors.capacity_by_region_model(), "regions": regions}
        return Response(
            {
                "gpu_models": GpuModelSerializer(
                    GpuModel.objects.filter(is_active=True), many=True, context=context
                ).data,
                "images": ImageSerializer(selectors.images_active(), many=True).data,
                "regions": RegionSerializer(offered, many=True).data,
            }
        )


class QuotaView(APIView):
    @extend_schema(
        summary="Your GPU quota per model and what is in use",
        tags=["quota"],
        responses=inline_serializer(
            "QuotaRow",
            {
                "gpu_model": serializers.CharField(),
                "limit": serializers.IntegerField(),
                "base": serializers.IntegerField(),
                "used": serializers.IntegerField(),
                "grant_until": serializers.DateTimeField(allow_null=True),
                "pending_request": serializers.BooleanField(),
            },
            many=True,
        ),
    )
    def get(self, request):
        try:
            require_quota_request(request)
        except errors.NotPermitted as exc:
            raise_as_api_error(exc)
        principal, _membership = acting(request)
        return Response(
            [
                {
                    "gpu_model": row["gpu_model"].slug,
                    "limit": row["limit"],
                    "base": row["base"],
                    "used": row["used"],
                    "grant_until": row["grant_until"],
                    "pending_request": row["pending"],
                }
                for row in selectors.quota_table_for(user=principal)
            ]
        )


@extend_schema_view(
    list=extend_schema(summary="Your quota requests", tags=["quota"]),
    retrieve=extend_schema(summary="One quota request", tags=["quota"]),
    create=extend_schema(summary="Ask for more GPU quota", tags=["quota"]),
)
class QuotaRequestViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    serializer_class = QuotaRequestSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return QuotaRequest.objects.none()
        try:
            require_quota_request(self.request)
        except errors.NotPermitted as exc:
            raise_as_api_error(exc)
        principal, _membership = acting(self.request)
        return selectors.quota_requests_for(user=principal)

    def create(self, request, *args, **kwargs):
        body = QuotaRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        principal, _membership = acting(request)
        try:
            require_quota_request(request)
            created = quota.quota_request_create(
                user=principal,
                actor=request.user,
                gpu_model=data["gpu_model"],
                cards=data["cards"],
                duration_days=data["duration_days"],
                reason=data["reason"],
            )
        except errors.InstanceError as exc:
            raise_as_api_error(exc)
        return Response(QuotaRequestSerializer(created).data, status=status.HTTP_201_CREATED)


class _BearerTokenScheme(OpenApiAuthenticationExtension):
    """The API token scheme in the schema, at low priority: the accounts app's own description wins
    once it registers one (this keeps `check --deploy` clean on a tree where it has not yet)."""

    target_class = "accounts.authentication.APITokenAuthentication"
    name = "bearerAuth"
    priority = -1

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer"}


# --- Staff: the quota review queue ---------------------------------------------------------------------------


# --- Reserved capacity: the holder's (read-only) and staff's ----------------------------------------------------


@extend_schema_view(
    list=extend_schema(summary="Your reserved capacity: reservations that have not ended"),
    retrieve=extend_schema(summary="One of your reservations"),
)
class ReservationViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The acting account's reservations (staff grant them). Another account's is a 404."""

    serializer_class = ReservationSerializer
    lookup_value_regex = r"\d+"

    def _principal(self):
        try:
            require_quota_request(self.request)
        except errors.NotPermitted as exc:
            raise_as_api_error(exc)
        principal, _membership = acting(self.request)
        return principal

    def get_queryset(self):
        return Reservation.objects.none()  # the schema's; list and retrieve read through the selectors

    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(selectors.reservations_for(user=self._principal()))
        return self.get_paginated_response(ReservationSerializer(page, many=True).data)

    def retrieve(self, request, *args, pk=None, **kwargs):
        try:
            pk = int(pk)
        except (TypeError, ValueError):
            raise Http404 from None
        found = selectors.reservation_get_for(user=self._principal(), pk=pk)
        return Response(ReservationSerializer(found).data)


_image_response = {200: SavedImageSerializer, 403: OpenApiResponse(description=_("Only its saver or an admin"))}


@extend_schema_view(
    list=extend_schema(summary="List your saved images", tags=["images"]),
    retrieve=extend_schema(summary="Get one saved image", tags=["images"]),
    destroy=extend_schema(
        summary="Delete a saved image",
        tags=["images"],
        responses={204: None, 409: OpenApiResponse(description="image_in_use (release those instances first)")},
    ),
)
class SavedImageViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet
):
    # Images the acting account saved from its instances (instances.images says who sees which); another
    # account's is a 404 whatever the credential. Launch from one by naming its id as a launch's image.
    serializer_class = SavedImageSerializer
    lookup_field = "slug"
    lookup_value_regex = r"img-[0-9a-f]{1,32}"  # a saved image's id; anything else is no route at all
    lookup_url_kwarg = "pk"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Image.objects.none()
        try:
            require_view(self.request)  # a billing viewer sees none of the team's resources (403)
        except errors.NotPermitted as exc:
            raise_as_api_error(exc)
        principal, membership = acting(self.request)
        images = images_saved_for(principal=principal, membership=membership, user=self.request.user)
        # A recipe (up to a MiB) and a build log are read by their own endpoints, never by a list.
        return images.defer("recipe", "build_log") if self.action not in ("recipe", "build_log") else images

    def _changed(self, verb, body_class=None, **extra):
        """The image (404 for one the person does not see), a 403 for one they only see, then the body."""
        image = self.get_object()
        _principal, membership = acting(self.request)
        try:
            if image_access(image=image, membership=membership, user=self.request.user) != Access.OPERATE:
                raise errors.NotPermitted(
                    _("Only the member who saved this image and the team's admins may change it.")
                )
            kwargs = {}
            if body_class is not None:
                body = body_class(data=self.request.data)
                body.is_valid(raise_exception=True)
                kwargs = body.validated_data
            return verb(image=image, **kwargs, **extra)
        except errors.InstanceError as exc:
            raise_as_api_error(exc)

    @extend_schema(
        summary="Rename a saved image, or change its note",
        tags=["images"],
        request=ImageRenameSerializer,
        responses=_image_response,
    )
    @action(detail=True, methods=["post"])
    def rename(self, request, pk=None):
        image = self._changed(services.image_rename, ImageRenameSerializer)
        return Response(SavedImageSerializer(image).data)

    @extend_schema(
        summary="Share a saved image with the team, or stop sharing it",
        tags=["images"],
        request=ImageShareSerializer,
        responses=_image_response,
    )
    @action(detail=True, methods=["post"])
    def share(self, request, pk=None):
        image = self._changed(services.image_share, ImageShareSerializer, actor=request.user)
        return Response(SavedImageSerializer(image).data)

    def destroy(self, request, *args, **kwargs):
        self._changed(services.image_delete, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="A saved image's recipe",
        description=(
            "The Containerfile that rebuilds the image, as plain text: read off its layer when it was saved "
            "(its base by digest, the Debian and Python packages it added by version, the files it deleted, "
            "the other files copied from the image itself), or the recipe it was built from. Edit it and "
            "POST it to /api/v1/images/build/. 409 no_recipe for an image the console could not read one off."
        ),
        tags=["images"],
        responses={
            (200, "text/plain"): OpenApiTypes.STR,
            409: OpenApiResponse(description="no_recipe"),
        },
    )
    @action(detail=True, methods=["get"])
    def recipe(self, request, pk=None):
        image = self.get_object()
        if not image.recipe:
            raise ServiceError(detail=_("The console could not read a recipe off this image."), code="no_recipe")
        response = HttpResponse(image.recipe, content_type="text/plain; charset=utf-8")
        response["Content-Disposition"] = 'inline; filename="Containerfile"'
        return response

    @extend_schema(
        summary="A built image's build log",
        description="The tail of the builder's log as plain text, while it builds and after (empty for saves).",
        tags=["images"],
        responses={(200, "text/plain"): OpenApiTypes.STR},
    )
    @action(detail=True, methods=["get"], url_path="build-log", url_name="build-log")
    def build_log(self, request, pk=None):
        return HttpResponse(self.get_object().build_log, content_type="text/plain; charset=utf-8")

    @extend_schema(
        summary="Build an image from a recipe",
        description=(
            "Build a new image of the acting account from a recipe (a Containerfile; start from a saved "
            "image's, GET /api/v1/images/{id}/recipe/). It is checked first: one FROM of the console's registry "
            "that you may use (your saved images, your team's shared ones, the catalogue's), COPY only "
            "--from such images (there is no build context), no ADD, ONBUILD or RUN options; anything else is a "
            "400 naming the line. Answers 202 with the image `building`; it becomes `ready` (billed per GB-day as "
            "a saved image) or `failed` with the log's tail (nothing billed). Its log: .../build-log/."
        ),
        tags=["images"],
        request=ImageBuildSerializer,
        responses={
            202: SavedImageSerializer,
            400: OpenApiResponse(description="invalid (the recipe, the name or the tag)"),
            409: OpenApiResponse(description="image_exists, image_build_not_supported"),
        },
    )
    # No Idempotency-Key: a repeat is a 409 ``image_exists`` (the same name and tag), and nothing is billed
    # before the build is ready.
    @action(detail=False, methods=["post"], url_path="build", url_name="build")
    def build(self, request):
        try:
            require_view(request)
            require_launch(request)
            body = ImageBuildSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            principal, membership = acting(request)
            image = services.image_build(
                principal=principal, membership=membership, actor=request.user, **body.validated_data
            )
        except errors.InstanceError as exc:
            raise_as_api_error(exc)
        return Response(SavedImageSerializer(image).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        summary="Bring your own image",
        description=(
            "Import an image from a registry the operator allows: the console reads its manifest and config "
            "(with your saved login for that registry, if any; no layer is downloaded) and answers with what "
            "it found: size, platform, whether it follows the image contract. It is READY at once, pinned to "
            "the digest read; launch from it by naming its id as a launch's image. Nothing is billed for it."
        ),
        tags=["images"],
        request=ImageImportSerializer,
        responses={
            201: SavedImageSerializer,
            400: OpenApiResponse(description="invalid (not a reference, a bad name), registry_not_allowed"),
            403: OpenApiResponse(description="registry_auth_required, registry_auth_failed, or a role that may not"),
            404: OpenApiResponse(description="image_not_found"),
            409: OpenApiResponse(description="image_exists"),
            422: OpenApiResponse(description="image_wrong_architecture"),
            503: OpenApiResponse(description="registry_unavailable (with Retry-After)"),
        },
    )
    # No Idempotency-Key: an import spends nothing, a repeat is a 409 ``image_exists``, and the key's
    # transaction would be held open while the registry is asked.
    @action(detail=False, methods=["post"], url_path="import", url_name="import")
    def import_image(self, request):
        try:
            require_view(request)
            require_launch(request)
            body = ImageImportSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            principal, _membership = acting(request)
            image = services.image_import(owner=principal, actor=request.user, **body.validated_data)
        except errors.InstanceError as exc:
            raise_as_api_error(exc)
        return Response(SavedImageSerializer(image).data, status=status.HTTP_201_CREATED)


@extend_schema_view(
    retrieve=extend_schema(summary="Get one snapshot", tags=["snapshots"]),
    destroy=extend_schema(
        summary="Delete a snapshot",
        tags=["snapshots"],
        responses={204: None, 409: OpenApiResponse(description="invalid_state (being made or restored)")},
    ),
)
class SnapshotViewSet(mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    # Snapshots of the instances the acting account owns; another account's is a 404 whatever the
    # credential, and a change asks the same as a change of its instance (require_operate).
    serializer_class = SnapshotSerializer
    lookup_field = "slug"
    lookup_value_regex = r"snap-[0-9a-f]{1,32}"  # a snapshot's id; anything else is no route at all
    lookup_url_kwarg = "pk"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Snapshot.objects.none()
        try:
            require_view(self.request)
        except errors.NotPermitted as exc:
            raise_as_api_error(exc)
        principal, _membership = acting(self.request)
        visible = selectors.instance_list_for(user=principal, include_released=True).values("pk")
        return Snapshot.objects.filter(owner=principal, instance__in=visible, status__in=Snapshot.LIVE).select_related(
            "instance", "created_by"
        )

    def _changed(self, verb, **kwargs):
        snapshot = self.get_object()
        try:
            require_operate(self.request, snapshot.instance)
            return verb(snapshot=snapshot, **kwargs)
        except errors.InstanceError as exc:
            raise_as_api_error(exc)

    @extend_schema(
        summary="Restore a snapshot into its (stopped) instance",
        description="Replaces the instance's disk with the snapshot's content: what was written since is "
        "lost. The instance must be stopped (409 invalid_state otherwise) and cannot start until the restore "
        "is done (the snapshot is `restoring`, then `ready` with `restored_at`).",
        tags=["snapshots"],
        request=None,
        responses={202: SnapshotSerializer, 409: OpenApiResponse(description="invalid_state")},
    )
    @action(detail=True, methods=["post"])
    def restore(self, request, pk=None):
        snapshot = self._changed(services.snapshot_restore, actor=request.user)
        snapshot.refresh_from_db()
        return Response(SnapshotSerializer(snapshot).data, status=status.HTTP_202_ACCEPTED)

    def destroy(self, request, *args, **kwargs):
        self._changed(services.snapshot_delete, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
