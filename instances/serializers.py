"""The REST API's serializers for instances, the catalogue, GPU quota and reservations: what goes in and out.

Validation that needs the database stays in the services; a serializer checks shapes and resolves
what the caller names (a catalogue slug, the caller's own volume) within what the caller may see.
"""

from __future__ import annotations

import re

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from accounts.models import SSHKey
from core.drf import SlugRelatedField, StrictJsonTypes
from core.messages import shown
from instances import selectors
from instances.acting import acting
from instances.boot import boot_timeline
from instances.capacity import reservations
from instances.catalogue_cache import catalogue_active
from instances.hooks import volume_hooks
from instances.images import image_launchable_for
from instances.models import GpuModel, Image, Instance, InstanceEvent, QuotaRequest, Region, Reservation, Snapshot
from instances.services.images import image_billed_gb
from instances.services.snapshots import snapshot_billed_gb
from providers.base import BOOT_STAGES
from vault.selectors import secret_list_for


class InstanceSerializer(serializers.ModelSerializer):
    region = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    gpu_model = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    image = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    status_display = serializers.CharField(source="get_status_display", read_only=True)
    status_reason = serializers.CharField(source="status_reason_text", read_only=True)
    ssh_keys = serializers.PrimaryKeyRelatedField(many=True, read_only=True)
    entry_points = serializers.SerializerMethodField()
    boot = serializers.SerializerMethodField()
    queue_position = serializers.SerializerMethodField()
    no_gpu = serializers.BooleanField(
        read_only=True,
        help_text=_(
            "The current (or last) run is without GPU: no cards held, a small CPU/RAM allowance, the no-GPU "
            "price. gpu_count stays what a normal start takes."
        ),
    )
    billed_hourly_fen = serializers.SerializerMethodField(
        help_text=_(
            "What it is billed per hour now, in fen: the no-GPU price in no-GPU mode, else hourly_price_fen; "
            "null while it is not running (a stopped instance pays only for its disk, per GB-day)."
        )
    )

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
            "start_queued_at",
            "queue_position",
            "no_gpu",
            "billed_hourly_fen",
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
            "start_queued_at": when(instance.start_queued_at) if instance.start_queued_at else None,
            "queue_position": self.get_queue_position(instance),
            "no_gpu": instance.no_gpu,
            "billed_hourly_fen": self.get_billed_hourly_fen(instance),
        }

    @extend_schema_field(serializers.IntegerField(allow_null=True, min_value=1))
    def get_queue_position(self, instance: Instance) -> int | None:
        """Its place in the line of starts waiting for cards (1: next); null when not waiting in line."""
        return selectors.instance_start_queue_position(instance)

    def get_billed_hourly_fen(self, instance: Instance) -> int | None:
        # The statuses its compute meter is open in (``instances.lifecycle``: opened at RUNNING, kept
        # through a restart).
        if instance.status in (Instance.Status.RUNNING, Instance.Status.RESTARTING):
            return instance.billed_hourly_fen
        return None

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
class _OwnSecretField(SlugRelatedField):
    """A secret of the acting account, by name; another account's is "does not exist"."""

    def get_queryset(self):
        request = self.context.get("request")
        if request is None:
            return secret_list_for(owner=None).none()
        return secret_list_for(owner=acting(request)[0])


class InstanceSecretChoiceSerializer(serializers.Serializer):
    name = _OwnSecretField(slug_field="name", help_text="A secret saved under /api/v1/secrets/.")
    env = serializers.BooleanField(
        default=False,
        help_text="Also export it as the environment variable of that name (JupyterLab, code-server, SSH); "
        "it is always the file /run/console-secrets/<name>.",
    )

    def to_representation(self, instance):
        return {"name": instance.secret.name, "env": instance.env}


class InstanceSecretsSerializer(serializers.Serializer):
    secrets = InstanceSecretChoiceSerializer(many=True, max_length=100)


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


SAVED_IMAGE_ID = re.compile(r"img-[0-9a-f]{1,32}")


@extend_schema_field(OpenApiTypes.STR)
class LaunchImageField(CatalogueSlugField):
    """A catalogue image's slug, or one of the caller's saved images (``img-…``) that is ready, as the
    acting context sees it (``instances.images``): another account's is "does not exist"."""

    def to_internal_value(self, data):
        # Only a saved image's id is looked up (``img-`` and hex): anything else is the catalogue's error.
        if isinstance(data, str) and SAVED_IMAGE_ID.fullmatch(data) and data not in catalogue_active(Image):
            request = self.context.get("request")
            if request is not None:
                principal, membership = acting(request)
                found = image_launchable_for(slug=data, principal=principal, membership=membership, user=request.user)
                if found is not None:
                    return found
        return super().to_internal_value(data)


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
    image = LaunchImageField(Image, help_text="A catalogue image's slug, or one of your saved images' id (img-…).")
    disk_gb = serializers.IntegerField(default=settings.INSTANCES_DISK_DEFAULT_GB)
    ssh_keys = serializers.PrimaryKeyRelatedField(many=True, required=False, queryset=SSHKey.objects.none())
    volumes = LaunchVolumeSerializer(many=True, required=False, help_text="Volumes to attach, mounted at boot.")
    ports = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=65535),
        required=False,
        max_length=16,
        help_text="HTTP ports the owner will serve, each at /i/<id>/p<port>/ (see the ports endpoints).",
    )
    secrets = InstanceSecretChoiceSerializer(
        many=True,
        required=False,
        max_length=100,
        help_text="Your secrets the machine gets at every boot, as files in /run/console-secrets/ (and variables).",
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


class InstanceStartSerializer(serializers.Serializer):
    wait = serializers.BooleanField(
        default=False,
        help_text=_(
            "When no cards are free for it now, wait in line (answered 202) instead of being refused; "
            "it starts by itself when cards free up, first come first served."
        ),
    )
    no_gpu = serializers.BooleanField(
        required=False,
        default=False,
        help_text=_(
            "Start without GPU: the same disk and image, a small CPU/RAM allowance, no cards, billed at the "
            "no-GPU price per hour. Only a stopped single machine (not a cluster); false (the default) "
            "starts it with its cards."
        ),
    )


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
            regions[r]: {"free": v["free"], "largest_on_one_node": v["best"], "waiting_in_line": v["waiting"]}
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
    # allow_blank: DRF reads an empty query value (``?status=``) as an omitted one, so the default; the
    # schema says so rather than promise a 400 the server never gives.
    status = serializers.ChoiceField(
        choices=["all", *QuotaRequest.Status.values],
        default=QuotaRequest.Status.PENDING,
        allow_blank=True,
        help_text="pending (the default, also when empty: the queue, most urgent first), all, or one status "
        "(newest first).",
    )

    def validate_status(self, value: str) -> str:
        return value or QuotaRequest.Status.PENDING


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
    # Empty (or omitted): every status. allow_blank, so the schema does not ask for at least one character.
    status = serializers.ChoiceField(
        choices=[("", "all"), *Reservation.Status.values],
        default="",
        required=False,
        allow_blank=True,
        help_text="One status, or empty (the default) for all.",
    )


class SavedImageSerializer(serializers.ModelSerializer):
    """An image an account saved from an instance: what the Images page shows, and what a launch names
    (``id``, as the launch's ``image``)."""

    id = serializers.CharField(source="slug", read_only=True)
    status_reason = serializers.SerializerMethodField()
    reference = serializers.CharField(source="pinned_ref", read_only=True, help_text="repository@digest once ready")
    source_instance = serializers.UUIDField(source="source_instance_id", read_only=True, allow_null=True)
    saved_by = serializers.CharField(source="created_by.username", read_only=True, default="")
    billed_gb = serializers.SerializerMethodField(help_text="GB (GiB, rounded up) billed per day while it exists")

    class Meta:
        model = Image
        fields = [
            "id",
            "name",
            "tag",
            "note",
            "status",
            "status_reason",
            "size_bytes",
            "billed_gb",
            "digest",
            "reference",
            "shared",
            "source_instance",
            "saved_by",
            "imported_from",
            "platform",
            "follows_contract",
            "created_at",
        ]
        read_only_fields = fields
        extra_kwargs = {
            "imported_from": {"help_text": "The reference it was imported from (bring your own image); empty if saved"},
            "platform": {"help_text": "os/architecture, as its registry reported it (imported images)"},
            "follows_contract": {
                "help_text": "Imported images: whether it follows the image contract (else the console mounts its "
                "start script at launch); null for saved images"
            },
        }

    def get_status_reason(self, image: Image) -> str:
        return shown(image.status_reason)

    def get_billed_gb(self, image: Image) -> int:
        if image.imported_from:
            return 0  # the console keeps no copy of an imported image
        return image_billed_gb(image.size_bytes) if image.status == Image.Status.READY else 0


class ImageSaveSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=64, help_text="lower-case letters, digits, . _ - between them")
    tag = serializers.CharField(max_length=128, default="latest")
    note = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


class ImageImportSerializer(StrictJsonTypes, serializers.Serializer):
    reference = serializers.CharField(
        max_length=300, help_text="registry/repository:tag or registry/repository@sha256:digest, on an allowed registry"
    )
    name = serializers.CharField(
        max_length=64, required=False, allow_blank=True, default="", help_text="default: the repository's last part"
    )
    tag = serializers.CharField(
        max_length=128, required=False, allow_blank=True, default="", help_text="default: the reference's tag"
    )
    note = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


class ImageBuildSerializer(StrictJsonTypes, serializers.Serializer):
    recipe = serializers.CharField(
        max_length=settings.INSTANCES_IMAGE_BUILD_RECIPE_MAX_BYTES,
        trim_whitespace=False,
        help_text="A Containerfile: one FROM of the console's registry you may use (your saved images, your "
        "team's shared ones, the catalogue's), COPY only --from such images, no ADD or RUN options",
    )
    name = serializers.CharField(max_length=64, help_text="the new image's name")
    tag = serializers.CharField(max_length=128, required=False, allow_blank=True, default="latest")
    note = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


class ImageRenameSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=64, required=False)
    note = serializers.CharField(max_length=500, required=False, allow_blank=True)


class ImageShareSerializer(serializers.Serializer):
    shared = serializers.BooleanField(help_text="true: every member of the team sees it and may launch from it")


class SnapshotSerializer(serializers.ModelSerializer):
    """A snapshot of an instance's disk: its state, how far the copy has got, what it takes and bills."""

    id = serializers.CharField(source="slug", read_only=True)
    name = serializers.CharField(source="label", read_only=True)
    instance = serializers.UUIDField(source="instance_id", read_only=True)
    status_reason = serializers.SerializerMethodField()
    billed_gb = serializers.SerializerMethodField(help_text="GB (GiB, rounded up) billed per day while it exists")
    taken_by = serializers.CharField(source="created_by.username", read_only=True, default="")

    class Meta:
        model = Snapshot
        fields = [
            "id",
            "name",
            "instance",
            "kind",
            "status",
            "status_reason",
            "progress",
            "size_bytes",
            "billed_gb",
            "taken_by",
            "created_at",
            "ready_at",
            "restored_at",
        ]
        read_only_fields = fields

    def get_status_reason(self, snapshot: Snapshot) -> str:
        return shown(snapshot.status_reason)

    def get_billed_gb(self, snapshot: Snapshot) -> int:
        if snapshot.status in (Snapshot.Status.READY, Snapshot.Status.RESTORING):
            return snapshot_billed_gb(snapshot.size_bytes)
        return 0


class ExperimentRunSerializer(serializers.Serializer):
    """A W&B run the instance started, as the console's hook in its image recorded it (an address on the
    tracking service's host; the rest as the program named it)."""

    url = serializers.URLField()
    host = serializers.CharField()
    name = serializers.CharField(allow_blank=True)
    project = serializers.CharField(allow_blank=True)
    entity = serializers.CharField(allow_blank=True)
    id = serializers.CharField(allow_blank=True)
    at = serializers.DateTimeField(allow_null=True)


class SnapshotCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")


class SnapshotScheduleSerializer(serializers.Serializer):
    every_hours = serializers.IntegerField(
        min_value=0, max_value=168, allow_null=True, help_text="hours between snapshots; 0 or null: no schedule"
    )
    keep = serializers.IntegerField(
        min_value=1,
        max_value=settings.INSTANCES_SNAPSHOTS_MAX,
        required=False,
        default=1,
        help_text="scheduled snapshots kept",
    )
    next_at = serializers.DateTimeField(read_only=True, allow_null=True)


class CloneSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    snapshot = serializers.CharField(
        max_length=40,
        required=False,
        allow_blank=True,
        default="",
        help_text="a ready snapshot's id; empty: one taken now",
    )
