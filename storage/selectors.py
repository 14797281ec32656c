"""Reads for the storage app, scoped to the user who asks: a stranger's volume is a 404 by construction."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Prefetch, QuerySet, Sum
from django.db.models.functions import Coalesce
from django.shortcuts import get_object_or_404
from django.utils import timezone

from billing.meter_arithmetic import amount_owed, elapsed_seconds
from billing.models import Meter
from instances.models import Instance, Region
from providers import get_backend
from storage.models import Volume, VolumeAttachment

IS = Instance.Status

# Instances whose attachments no longer count: gone, or being destroyed with their mounts.
DEAD_INSTANCE = (IS.RELEASING, IS.RELEASED, IS.FAILED, IS.LOST)
# Instances whose machine may have its volumes mounted right now (a stopped one has none mounted).
BOOTED_INSTANCE = (
    IS.REQUESTED,
    IS.SCHEDULING,
    IS.PROVISIONING,
    IS.RUNNING,
    IS.RESTARTING,
    IS.STOPPING,
    IS.STARTING,
)
# What volumes are billed under: one SKU (per GB-day) and one meter per volume.
SKU_CODE = "volume-gb-day"


def volume_meter_ref(volume_id) -> str:
    return f"volume:{volume_id}"


def region_supports_volumes(region: Region) -> bool:
    try:
        return bool(get_backend(region.backend_alias).supports_volumes)
    except (ImproperlyConfigured, ImportError):  # an alias no longer configured: no volumes there
        return False


def storage_quota_used(*, user, excluding=None) -> int:
    """GB the user holds in volumes (a resize in flight counts at its target size)."""
    qs = Volume.objects.filter(owner=user, status__in=Volume.HOLDING)
    if excluding is not None:
        qs = qs.exclude(pk=excluding.pk)
    return qs.aggregate(n=Sum(Coalesce("resize_to_gb", "size_gb")))["n"] or 0


def _live_attachments() -> QuerySet[VolumeAttachment]:
    return (
        VolumeAttachment.objects.exclude(instance__status__in=DEAD_INSTANCE)
        .select_related("instance")
        .order_by("created_at", "id")
    )


def volume_list_for(*, user, include_deleted: bool = False) -> QuerySet[Volume]:
    qs = Volume.objects.filter(owner=user).select_related("region")
    if not include_deleted:
        qs = qs.exclude(status=Volume.Status.DELETED)
    return qs.prefetch_related(Prefetch("attachments", queryset=_live_attachments())).order_by("-created_at")


def volume_get_for(*, user, volume_id) -> Volume:
    return get_object_or_404(
        Volume.objects.select_related("region").prefetch_related(Prefetch("attachments", queryset=_live_attachments())),
        pk=volume_id,
        owner=user,
    )


def attachment_get_for(*, user, volume: Volume, attachment_id) -> VolumeAttachment:
    return get_object_or_404(
        VolumeAttachment.objects.select_related("instance", "volume"),
        pk=attachment_id,
        volume=volume,
        volume__owner=user,
    )


def attachable_instances_for(*, user, volume: Volume) -> QuerySet[Instance]:
    """The user's instances a volume could be attached to: live, in its region."""
    return (
        Instance.objects.filter(owner=user, region_id=volume.region_id)
        .exclude(status__in=DEAD_INSTANCE)
        .order_by("-created_at")
    )


def volume_regions() -> list[Region]:
    """Active regions whose backend offers volumes (the create form's choices)."""
    return [region for region in Region.objects.filter(is_active=True) if region_supports_volumes(region)]


def attachable_volumes_for(*, user) -> QuerySet[Volume]:
    """The user's volumes that can be attached now (the launch form's choices)."""
    return Volume.objects.filter(owner=user, status__in=Volume.MOUNTABLE).select_related("region").order_by("name")


def instance_mounts(*, instance: Instance) -> list[VolumeAttachment]:
    """The instance's attachments with their volumes, in mount order (the instance page)."""
    return list(
        VolumeAttachment.objects.filter(instance=instance)
        .exclude(volume__status=Volume.Status.DELETED)
        .select_related("volume")
        .order_by("created_at", "id")
    )


# --- Cost ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VolumeCost:
    per_day_fen: int  # what it costs per day now (0 when not billed: creating, deleting, failed)
    month_fen: int  # accrued since the start of this month (TIME_ZONE), settled or not


def _month_start(now: datetime) -> datetime:
    local = timezone.localtime(now)
    return local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def _accrued(meter: Meter, *, since: datetime, now: datetime) -> int:
    """What ``meter`` owes for its seconds after ``since``: the meter's own rounding from its start, so
    the months of a meter add up to what it is charged."""
    end = meter.stopped_at or now
    if end <= since:
        return 0

    def owed(until: datetime) -> int:
        seconds = elapsed_seconds(start=meter.started_at, end=until)
        return amount_owed(
            price_fen=meter.price_fen, quantity=meter.quantity, unit_seconds=meter.unit_seconds, seconds=seconds
        )

    return owed(end) - owed(max(since, meter.started_at))


def volume_costs(*, volumes, now: datetime | None = None) -> dict:
    """``{volume_id: VolumeCost}`` from the volumes' meters, in one query."""
    now = now or timezone.now()
    since = _month_start(now)
    refs = {volume_meter_ref(v.pk): v.pk for v in volumes}
    costs = {v.pk: {"per_day": 0, "month": 0} for v in volumes}
    meters = Meter.objects.filter(ref__in=list(refs)).exclude(stopped_at__lt=since)
    for meter in meters:
        cost = costs[refs[meter.ref]]
        cost["month"] += _accrued(meter, since=since, now=now)
        if meter.stopped_at is None:
            cost["per_day"] += meter.price_fen * meter.quantity * 86400 // meter.unit_seconds
    return {pk: VolumeCost(per_day_fen=c["per_day"], month_fen=c["month"]) for pk, c in costs.items()}


def storage_summary_for(*, user, volumes: list[Volume], costs: dict, now: datetime | None = None) -> dict:
    """The totals the storage page heads with. The month's total includes volumes deleted this month."""
    now = now or timezone.now()
    since = _month_start(now)
    month = sum(
        _accrued(meter, since=since, now=now)
        for meter in Meter.objects.filter(user=user, sku__code=SKU_CODE).exclude(stopped_at__lt=since)
    )
    return {
        "count": len(volumes),
        "size_gb": sum(v.size_gb for v in volumes if v.status in Volume.HOLDING),
        "used_bytes": sum(v.used_bytes or 0 for v in volumes),
        "per_day_fen": sum(c.per_day_fen for c in costs.values()),
        "month_fen": month,
        "quota_gb": settings.STORAGE_VOLUME_QUOTA_GB,
        "quota_used_gb": storage_quota_used(user=user),
        "price_fen_per_gb_day": settings.STORAGE_VOLUME_PRICE_FEN_PER_GB_DAY,
    }
