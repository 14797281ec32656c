"""The REST API for instances, the catalogue and GPU quota. Same services, same errors as the pages.

Domain refusals map to the console's error format: a field problem is a 400 with ``fields``; a
business refusal is a 409 whose ``code`` says which (``no_capacity``, ``quota_exceeded``,
``insufficient_funds``, ``invalid_state``).
"""

from __future__ import annotations

from django.conf import settings
from django.db.models import Prefetch
from django.http import Http404
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.permissions import IsAdminUser
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.models import SSHKey
from core.api import ServiceError, SlugRelatedField
from idempotency.api import IDEMPOTENCY_KEY_PARAMETER, idempotent
from instances import errors, quota, selectors, services, tasks
from instances.acting import acting, require_launch, require_operate, require_quota_request, require_view
from instances.boot import boot_timeline
from instances.capacity import reservations, resize
from instances.catalogue_cache import catalogue_active
from instances.filters import InstanceFilter
from instances.hooks import volume_hooks
from instances.models import GpuModel, Image, Instance, InstanceEvent, QuotaRequest, Region, Reservation
from providers.base import BOOT_STAGES


def _raise(exc: errors.InstanceError):
    if isinstance(exc, errors.NotPermitted):
        raise PermissionDenied(detail=exc.message, code=exc.code) from exc
    if isinstance(exc, errors.LaunchInvalid | errors.QuotaRequestInvalid | errors.ReservationInvalid):
        raise ValidationError({exc.field or "non_field_errors": [exc.message]}) from exc
    raise ServiceError(detail=exc.message, code=exc.code) from exc


# --- Serializers ----------------------------------------------------------------------------------------


class InstanceSerializer(serializers.ModelSerializer):
    region = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    gpu_model = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    image = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    status_display = serializers.CharField(source="get_status_display", read_only=True)
    status_reason = serializers.CharField(source="status_reason_text", read_only=True)
    ssh_keys = serializers.PrimaryKeyRelatedField(many=True, read_only=True)
    entry_points = serializers.SerializerMethodField()
    boot = serializers.SerializerMethodField()

    class Meta:
        model = Instance
        fields = [
            "id",
            "name",
            "status",
            "status_display",
            "status_reason",
            "region",
            "gpu_model",
            "gpu_count",
            "node_count",
            "image",
            "disk_gb",
            "ssh_keys",
            "hourly_price_fen",
            "tier",
            "auto_stop_at",
            "auto_stop_idle_minutes",
            "created_at",
            "status_changed_at",
            "running_since",
            "entry_points",
            "image_ref",
            "boot",
        ]
        read_only_fields = fields

    def to_representation(self, instance: Instance) -> dict:
        # The list endpoint's hot path: the same output as the declared fields, built directly
        # (ModelSerializer's field-by-field walk costs ~0.4 ms per row; this ~0.05 ms).
        when = _DATETIME.to_representation
        return {
            "id": str(instance.pk),
            "name": instance.name,
            "status": instance.status,
            "status_display": str(instance.get_status_display()),
            "status_reason": instance.status_reason_text,  # in the request's language
            "region": instance.region.slug,
            "gpu_model": instance.gpu_model.slug,
            "gpu_count": instance.gpu_count,
            "node_count": instance.node_count,
            "image": instance.image.slug,
            "disk_gb": instance.disk_gb,
            "ssh_keys": self.context["ssh_key_ids"]
            if "ssh_key_ids" in self.context
            else [k.pk for k in instance.ssh_keys.all()],
            "hourly_price_fen": instance.hourly_price_fen,
            "tier": instance.tier,
            "auto_stop_at": when(instance.auto_stop_at) if instance.auto_stop_at else None,
            "auto_stop_idle_minutes": instance.auto_stop_idle_minutes,
            "created_at": when(instance.created_at),
            "status_changed_at": when(instance.status_changed_at),
            "running_since": when(instance.running_since) if instance.running_since else None,
            "entry_points": self.get_entry_points(instance),
            "image_ref": instance.image_ref,
            "boot": self.get_boot(instance),
        }

    @extend_schema_field(
        inline_serializer(
            "Boot",
            {
                "stages": inline_serializer(
                    "BootStage",
                    {
                        "stage": serializers.ChoiceField(choices=BOOT_STAGES),
                        "started_at": serializers.DateTimeField(),
                        "seconds": serializers.FloatField(allow_null=True),
                        "failed": serializers.BooleanField(),
                    },
                    many=True,
                ),
                "pull": inline_serializer(
                    "ImagePull",
                    {
                        "bytes_done": serializers.IntegerField(),
                        "bytes_total": serializers.IntegerField(),
                        "bytes_per_second": serializers.FloatField(allow_null=True),
                        "seconds_left": serializers.FloatField(allow_null=True),
                    },
                    allow_null=True,
                ),
                "total_seconds": serializers.FloatField(allow_null=True),
            },
            allow_null=True,
        )
    )
    def get_boot(self, instance: Instance) -> dict | None:
        """The current (or last) boot's stages as the provider's polls reported them: each one's start and
        length (null while it is the stage now), the image pull's progress while it runs."""
        timeline = boot_timeline(instance=instance)
        if timeline is None:
            return None
        when = _DATETIME.to_representation
        pull = timeline.pull
        return {
            "stages": [
                {"stage": s.key, "started_at": when(s.started_at), "seconds": s.seconds, "failed": s.failed}
                for s in timeline.stages
            ],
            "pull": {
                "bytes_done": pull.done,
                "bytes_total": pull.total,
                "bytes_per_second": pull.rate_bytes_s,
                "seconds_left": pull.seconds_left,
            }
            if pull
            else None,
            "total_seconds": timeline.total_seconds,
        }

    @extend_schema_field(
        inline_serializer(
            "EntryPoints",
            {
                "jupyterlab_url": serializers.CharField(allow_null=True),
                "vscode_url": serializers.CharField(allow_null=True),
                "ssh_command": serializers.CharField(allow_null=True),
                "gateway_command": serializers.CharField(allow_null=True),
            },
        )
    )
    def get_entry_points(self, instance: Instance) -> dict:
        request = self.context.get("request")
        host = request.get_host() if request is not None else ""
        return selectors.instance_entry_points(instance=instance, host=host)


_DATETIME = serializers.DateTimeField()
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
)


@extend_schema_field(OpenApiTypes.UUID)
class _OwnVolumeField(serializers.PrimaryKeyRelatedField):
    """A volume of the requesting user; another user's id is "does not exist", as any stranger's object."""

    def get_queryset(self):
        request = self.context.get("request")
        owned = volume_hooks().owned
        return owned(user=acting(request)[0]) if request is not None else owned(user=None).none()


class LaunchVolumeSerializer(serializers.Serializer):
    volume = _OwnVolumeField()
    mount_path = serializers.CharField(max_length=128)
    mode = serializers.ChoiceField(choices=["rw", "ro", "shared-rw"], default="rw")


@extend_schema_field(OpenApiTypes.STR)
class CatalogueSlugField(serializers.Field):
    """The slug of an active region, GPU model or image, looked up in the process's copy of the
    catalogue (``instances.catalogue_cache``): no query per launch.

    A plain field, not a related one: DRF copies a serializer's fields for every instance of it, and a
    related field's copy builds a queryset each time, three of them on every launch request.
    """

    default_error_messages = SlugRelatedField.default_error_messages

    def __init__(self, model, **kwargs) -> None:
        self.model = model
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        obj = catalogue_active(self.model).get(data)
        if obj is None:
            self.fail("does_not_exist", slug_name="slug", value=data.replace("\x00", ""))
        return obj

    def to_representation(self, value) -> str:
        return value.slug


class LaunchSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=64, required=False, allow_blank=True)
    region = CatalogueSlugField(Region)
    gpu_model = CatalogueSlugField(GpuModel)
    gpu_count = serializers.ChoiceField(choices=Instance.GPU_COUNTS)
    node_count = serializers.ChoiceField(
        choices=Instance.NODE_COUNTS,
        default=1,
        help_text="Nodes of a cluster, each with gpu_count cards (billed for all); at most INSTANCES_MAX_NODES.",
    )
    image = CatalogueSlugField(Image)
    disk_gb = serializers.IntegerField(default=settings.INSTANCES_DISK_DEFAULT_GB)
    ssh_keys = serializers.PrimaryKeyRelatedField(many=True, required=False, queryset=SSHKey.objects.none())
    volumes = LaunchVolumeSerializer(many=True, required=False, help_text="Volumes to attach, mounted at boot.")
    ports = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=65535),
        required=False,
        max_length=16,
        help_text="HTTP ports the owner will serve, each at /i/<id>/p<port>/ (see the ports endpoints).",
    )
    tier = serializers.ChoiceField(
        choices=Instance.Tier.values,
        default=Instance.Tier.ON_DEMAND,
        help_text="on-demand, or interruptible: cheaper (spot_price_per_card_hour_fen), preempted for on-demand work.",
    )
    checkpoint_command = serializers.CharField(
        max_length=500,
        required=False,
        allow_blank=True,
        help_text="Run on the machine when it is preempted, within the grace period (interruptible only).",
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        if request is not None:  # (schema generation has none)
            # Another user's key id is "does not exist", as any other stranger's object.
            self.fields["ssh_keys"].child_relation.queryset = request.user.ssh_keys.all()


class RenameSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=64)


class ResizeSerializer(serializers.Serializer):
    node_count = serializers.IntegerField(
        min_value=1, help_text=_("The cluster's new number of nodes (whole nodes; rank 0 stays).")
    )


class AutoStopSerializer(serializers.Serializer):
    at = serializers.DateTimeField(required=False, allow_null=True)
    idle_minutes = serializers.IntegerField(required=False, allow_null=True)


class EventSerializer(serializers.ModelSerializer):
    reason = serializers.CharField(source="reason_text", read_only=True)

    class Meta:
        model = InstanceEvent
        fields = ["kind", "old", "new", "reason", "created_at"]


class GpuModelSerializer(serializers.ModelSerializer):
    spot_price_per_card_hour_fen = serializers.IntegerField(
        source="spot_price_fen", read_only=True, help_text="The interruptible tier's price per card-hour."
    )
    free_cards = serializers.SerializerMethodField()
    free_cards_by_region = serializers.SerializerMethodField()

    class Meta:
        model = GpuModel
        fields = [
            "slug",
            "name",
            "vendor",
            "memory_gb",
            "price_per_card_hour_fen",
            "spot_price_per_card_hour_fen",
            "cpu_cores_per_card",
            "ram_gb_per_card",
            "free_cards",
            "free_cards_by_region",
        ]

    def _capacity(self) -> dict:
        return self.context["capacity"]

    def get_free_cards(self, obj) -> int:
        return sum(v["free"] for (_r, g), v in self._capacity().items() if g == obj.pk)

    def get_free_cards_by_region(self, obj) -> dict[str, dict[str, int]]:
        regions = self.context["regions"]
        return {
            regions[r]: {"free": v["free"], "largest_on_one_node": v["best"]}
            for (r, g), v in self._capacity().items()
            if g == obj.pk and r in regions
        }


class ImageSerializer(serializers.ModelSerializer):
    # Image slugs carry versions ("pytorch-2.5-cu124"): not a SlugField's pattern.
    slug = serializers.CharField(read_only=True)

    class Meta:
        model = Image
        fields = [
            "slug",
            "name",
            "framework",
            "framework_version",
            "cuda_version",
            "python_version",
            "os",
            # As published to the console's registry (``images_publish``): what a launch pins and pulls.
            "repository",
            "tag",
            "digest",
            "size_bytes",
            "contents",
        ]


class RegionSerializer(serializers.ModelSerializer):
    class Meta:
        model = Region
        fields = ["slug", "name"]


class QuotaRequestSerializer(serializers.ModelSerializer):
    gpu_model = SlugRelatedField(slug_field="slug", queryset=GpuModel.objects.filter(is_active=True))

    class Meta:
        model = QuotaRequest
        fields = [
            "id",
            "gpu_model",
            "cards",
            "duration_days",
            "reason",
            "status",
            "granted_cards",
            "message",
            "decided_at",
            "expires_at",
            "created_at",
        ]
        read_only_fields = ["id", "status", "granted_cards", "message", "decided_at", "expires_at", "created_at"]


# --- Views ----------------------------------------------------------------------------------------------------

_action_response = {200: InstanceSerializer, 409: OpenApiResponse(description=_("Not allowed in this state"))}


@extend_schema_view(
    list=extend_schema(summary="List your instances", tags=["instances"]),
    retrieve=extend_schema(summary="Get one instance", tags=["instances"]),
    create=extend_schema(
        summary="Launch an instance",
        tags=["instances"],
        request=LaunchSerializer,
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        responses={
            201: InstanceSerializer,
            400: OpenApiResponse(description=_("Invalid choice")),
            409: OpenApiResponse(description="no_capacity, quota_exceeded or insufficient_funds"),
        },
    ),
)
class InstanceViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    serializer_class = InstanceSerializer
    lookup_value_converter = "uuid"
    filter_backends = [DjangoFilterBackend]
    filterset_class = InstanceFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no user
            return Instance.objects.none()
        released = self.request.query_params.get("released", "").lower() in {"1", "true"}
        include_released = released or self.action != "list"
        try:
            require_view(self.request)  # a billing viewer sees none of the team's instances
        except errors.NotPermitted as exc:
            _raise(exc)
        principal, _membership = acting(self.request)
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
        principal, _membership = acting(request)
        try:
            require_launch(request)
            instance = services.instance_launch(services.LaunchRequest(user=principal, actor=request.user, **data))
        except errors.InstanceError as exc:
            _raise(exc)
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
            _raise(exc)
        return Response(InstanceSerializer(instance, context=self.get_serializer_context()).data)

    @extend_schema(summary="Start a stopped instance", tags=["instances"], request=None, responses=_action_response)
    @action(detail=True, methods=["post"])
    def start(self, request, pk=None):
        return self._act(services.instance_start, actor=request.user)

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
            _raise(exc)
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
            _raise(exc)
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
            _raise(exc)
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


class StaffQuotaRequestSerializer(serializers.ModelSerializer):
    """A request as staff review it: who asked, and its age against the review SLA while it waits."""

    user = serializers.EmailField(source="user.email", read_only=True)
    gpu_model = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    decided_by = serializers.EmailField(source="decided_by.email", read_only=True, allow_null=True, default=None)
    age_min = serializers.SerializerMethodField(help_text="Minutes since it was sent (while pending; else null).")
    sla_min = serializers.SerializerMethodField(help_text="INSTANCES_QUOTA_REVIEW_SLA_MIN: minutes promised.")
    overdue = serializers.SerializerMethodField(help_text="Pending for longer than the SLA.")

    class Meta:
        model = QuotaRequest
        fields = [
            "id",
            "user",
            "gpu_model",
            "cards",
            "duration_days",
            "reason",
            "status",
            "granted_cards",
            "message",
            "decided_by",
            "decided_at",
            "expires_at",
            "created_at",
            "age_min",
            "sla_min",
            "overdue",
        ]
        read_only_fields = fields

    def _age(self, obj: QuotaRequest) -> int | None:
        if obj.status != QuotaRequest.Status.PENDING:
            return None
        return max(int((timezone.now() - obj.created_at).total_seconds() // 60), 0)

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_age_min(self, obj: QuotaRequest) -> int | None:
        return self._age(obj)

    @extend_schema_field(serializers.IntegerField())
    def get_sla_min(self, obj: QuotaRequest) -> int:
        return int(settings.INSTANCES_QUOTA_REVIEW_SLA_MIN)

    @extend_schema_field(serializers.BooleanField())
    def get_overdue(self, obj: QuotaRequest) -> bool:
        age = self._age(obj)
        return age is not None and age >= settings.INSTANCES_QUOTA_REVIEW_SLA_MIN


class StaffQuotaListQuery(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=["all", *QuotaRequest.Status.values],
        default=QuotaRequest.Status.PENDING,
        help_text="pending (the default: the queue, most urgent first), all, or one status (newest first).",
    )


class StaffQuotaApproveSerializer(serializers.Serializer):
    cards = serializers.IntegerField(
        min_value=1, required=False, help_text="Cards to grant, at most those asked (default: all of them)."
    )
    days = serializers.IntegerField(
        min_value=1,
        max_value=settings.INSTANCES_QUOTA_MAX_DAYS,
        required=False,
        help_text="How long the grant lasts from now (default: the days asked).",
    )
    message = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")
    reserve_region = SlugRelatedField(
        slug_field="slug",
        queryset=Region.objects.filter(is_active=True),
        required=False,
        allow_null=True,
        default=None,
        help_text="Also reserve the granted cards in this region for the grant's window (or the part given).",
    )
    reserve_starts_at = serializers.DateTimeField(required=False, allow_null=True, default=None)
    reserve_ends_at = serializers.DateTimeField(required=False, allow_null=True, default=None)


class StaffQuotaDenySerializer(serializers.Serializer):
    message = serializers.CharField(max_length=2000, help_text="Why: the user reads it.")

    def validate_message(self, value: str) -> str:
        if not value.strip():
            raise ValidationError(_("Tell the user why."))
        return value


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
            _raise(exc)
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
            _raise(exc)
        return self._decided(decided)


# --- Reserved capacity: the holder's (read-only) and staff's ----------------------------------------------------


class ReservationSerializer(serializers.ModelSerializer):
    """A reservation as its holder sees it: where, what, when, and how many of its cards are in use."""

    region = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    gpu_model = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    current = serializers.BooleanField(read_only=True, help_text="Active and inside its window now.")
    in_use = serializers.IntegerField(
        read_only=True, help_text="Cards the holder's on-demand instances hold against it now."
    )

    class Meta:
        model = Reservation
        fields = ["id", "region", "gpu_model", "cards", "starts_at", "ends_at", "status", "current", "in_use"]
        read_only_fields = fields


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
            _raise(exc)
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


class StaffReservationSerializer(ReservationSerializer):
    account = serializers.SerializerMethodField(help_text="The holder: an e-mail address, or team:<slug>.")
    created_by = serializers.EmailField(source="created_by.email", read_only=True, allow_null=True, default=None)
    quota_request = serializers.PrimaryKeyRelatedField(read_only=True)

    class Meta(ReservationSerializer.Meta):
        fields = [*ReservationSerializer.Meta.fields, "account", "note", "created_by", "quota_request", "created_at"]
        read_only_fields = fields

    @extend_schema_field(serializers.CharField())
    def get_account(self, obj: Reservation) -> str:
        team = getattr(obj.account, "team", None)
        return f"team:{team.slug}" if team is not None else obj.account.email


class StaffReservationCreateSerializer(serializers.Serializer):
    account = serializers.CharField(max_length=254, help_text="A person's e-mail address, or a team's slug.")
    region = SlugRelatedField(slug_field="slug", queryset=Region.objects.filter(is_active=True))
    gpu_model = SlugRelatedField(slug_field="slug", queryset=GpuModel.objects.filter(is_active=True))
    cards = serializers.IntegerField(min_value=1, max_value=reservations.MAX_CARDS)
    starts_at = serializers.DateTimeField(required=False, allow_null=True, default=None, help_text="Default: now.")
    ends_at = serializers.DateTimeField()
    note = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")

    def validate_account(self, value: str):
        account = reservations.reservation_account_find(text=value.removeprefix("team:"))
        if account is None:
            raise ValidationError(_("No active account has that e-mail address or team slug."))
        return account


class StaffReservationListQuery(serializers.Serializer):
    status = serializers.ChoiceField(choices=["", *Reservation.Status.values], default="", required=False)


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
            _raise(exc)
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
            _raise(exc)
        return self._one(target.pk)
