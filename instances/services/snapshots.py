"""Snapshots of an instance's disk: take one (by hand or on a schedule), restore it into the same
instance, delete it; the worker's half of each; the schedule's beat pass and its retention.

A snapshot is a ``Snapshot`` row of the instance's account, CREATING until the worker has had the
provider copy the disk (``progress`` follows the copy), then READY and billed per GB-day
(``snapshot_meter_ref``, SKU ``snapshot.gb``, as a saved image's ``image.gb``) until it is deleted.
A restore wants the instance stopped (the page says so; the API answers 409 ``invalid_state``): the
snapshot is RESTORING, and the instance cannot start, until the provider has swapped the copy in.
Releasing the instance deletes its snapshots (the provider keeps them beside the disk).

Every verb starts with its guard and moves a snapshot by compare-and-set, so a repeat does nothing
more: the meter opens once per ref, a beat tick run twice takes one scheduled snapshot.
"""

from __future__ import annotations

import logging
import math
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from billing.models import Sku
from billing.services import meter_open, meter_stop, sku_upsert
from core.messages import reason as stored
from core.tasks import enqueue_on_commit
from instances.errors import LaunchInvalid, OperationNotAllowed, SnapshotLimitReached, SnapshotsNotSupported
from instances.models import Instance, Snapshot, SnapshotSchedule
from providers import PermanentBackendError, get_backend
from teams.models import TeamEvent
from teams.services import team_event_record

logger = logging.getLogger(__name__)
SNAPSHOT_SKU_CODE = "snapshot.gb"
S = Snapshot.Status
# A disk can be copied while the machine runs (frozen for the copy) or while it is stopped.
SNAPSHOTTABLE = (Instance.Status.RUNNING, Instance.Status.STOPPED)
# Statuses in which the instance has no disk any more: its snapshots went with it.
GONE = (Instance.Status.RELEASING, Instance.Status.RELEASED, Instance.Status.FAILED, Instance.Status.LOST)
SCHEDULE_HOURS = (1, 168)  # every hour … once a week


def snapshot_meter_ref(snapshot_id) -> str:
    return f"snapshot:{snapshot_id}:storage"


def snapshot_sku_upsert() -> Sku:
    """Storage, per GB-day: billing keeps it running when the money runs out, as a disk's."""
    price = settings.INSTANCES_SNAPSHOT_PRICE_FEN_PER_GB_DAY
    sku = Sku.objects.filter(code=SNAPSHOT_SKU_CODE).first()
    if sku is not None and sku.price_fen == price and sku.unit_seconds == 86400 and sku.is_storage:
        return sku
    return sku_upsert(
        code=SNAPSHOT_SKU_CODE,
        name="Disk snapshot",
        unit="GB-day",
        price_fen=price,
        unit_seconds=86400,
        is_storage=True,
    )


def snapshot_billed_gb(size_bytes: int) -> int:
    """Whole GB (GiB) billed for a snapshot of ``size_bytes``: rounded up, at least 1."""
    return max(1, math.ceil(size_bytes / 2**30))


def snapshots_supported(instance: Instance) -> bool:
    """Whether the instance's provider snapshots disks (read from its class and options, never asked)."""
    return bool(get_backend(instance.backend_alias).supports_snapshots)


def _check_supported(instance: Instance) -> None:
    if not snapshots_supported(instance):
        raise SnapshotsNotSupported(
            _("This instance's region cannot snapshot disks (its cluster has no volume snapshot support).")
        )


def _audit(snapshot: Snapshot, actor, action: str) -> None:
    """The team's audit event of a person's snapshot operation (a no-op on a personal account)."""
    team_event_record(
        account=snapshot.owner_id,
        actor=actor,
        action=action,
        target=snapshot.label,
        details={"snapshot": snapshot.slug, "instance": str(snapshot.instance_id)},
    )


def snapshot_create(*, instance: Instance, actor=None, label: str = "", kind: str = Snapshot.Kind.MANUAL) -> Snapshot:
    """Start a snapshot of ``instance``'s disk (running or stopped); the worker copies it
    (``snapshot_create_execute``). Refused in any other status, on a provider without snapshots, while
    another snapshot or restore of it is under way, or past ``INSTANCES_SNAPSHOTS_MAX``."""
    label = (label or "").strip() or timezone.localtime().strftime("%Y-%m-%d %H:%M")
    if len(label) > 64:
        raise LaunchInvalid(_("A snapshot's name is at most 64 characters."), field="name")
    if instance.status not in SNAPSHOTTABLE:
        raise OperationNotAllowed(_("Only a running or stopped instance's disk can be snapshotted."))
    _check_supported(instance)
    with transaction.atomic():
        # One operation on a disk at a time: the instance's row serialises them.
        Instance.objects.select_for_update().filter(pk=instance.pk).first()
        live = Snapshot.objects.filter(instance=instance).exclude(status__in=(S.DELETED, S.FAILED, S.DELETING))
        if live.filter(status__in=(S.CREATING, S.RESTORING)).exists():
            raise OperationNotAllowed(_("A snapshot or restore of this instance is under way: wait for it to finish."))
        if live.count() >= settings.INSTANCES_SNAPSHOTS_MAX:
            raise SnapshotLimitReached(
                _("This instance keeps %(n)d snapshots, the most it may: delete one first.")
                % {"n": settings.INSTANCES_SNAPSHOTS_MAX}
            )
        snapshot = Snapshot.objects.create(
            slug=f"snap-{uuid.uuid4().hex[:16]}",
            label=label,
            instance=instance,
            owner_id=instance.owner_id,
            created_by=actor,
            kind=kind,
        )
        if actor is not None:  # a scheduled one is the console's own
            _audit(snapshot, actor, TeamEvent.Action.SNAPSHOT_TAKEN)
        enqueue_on_commit("instances.tasks.snapshot_create_task", snapshot.pk)
    return snapshot


def _progress_writer(snapshot_id: int):
    def write(percent: int) -> None:
        Snapshot.objects.filter(pk=snapshot_id, status__in=(S.CREATING, S.RESTORING)).update(
            progress=max(0, min(100, int(percent)))
        )

    return write


def snapshot_create_execute(*, snapshot_id: int) -> None:
    """The worker's half of a snapshot: have the provider copy the disk, then mark it READY with its size
    and open its meter. Only a CREATING snapshot is acted on; a permanent refusal fails it with the
    provider's words; a transient one is raised for the task to retry."""
    snapshot = Snapshot.objects.select_related("instance").filter(pk=snapshot_id).first()
    if snapshot is None or snapshot.status != S.CREATING:
        return
    instance = snapshot.instance
    if instance.status in GONE:
        snapshot_fail(snapshot_id=snapshot_id, error=stored(gettext_noop("The instance no longer exists.")))
        return
    try:
        answer = get_backend(instance.backend_alias).snapshot_create(
            key=instance.key,
            state=instance.backend_state,
            snapshot=snapshot.slug,
            progress=_progress_writer(snapshot_id),
        )
    except PermanentBackendError as exc:
        snapshot_fail(snapshot_id=snapshot_id, error=str(exc))
        return
    size = int(answer.get("size_bytes") or 0)
    now = timezone.now()
    with transaction.atomic():
        moved = Snapshot.objects.filter(pk=snapshot_id, status=S.CREATING).update(
            status=S.READY, size_bytes=size, progress=100, provider_state=answer, ready_at=now, status_reason=""
        )
        if moved:
            gb = snapshot_billed_gb(size)
            meter_open(
                user=snapshot.owner,
                sku=snapshot_sku_upsert(),
                quantity=gb,
                ref=snapshot_meter_ref(snapshot_id),
                description=f"Snapshot {snapshot.label} of {instance.name} ({gb} GB)",
                at=now,
            )
    if moved and snapshot.kind == Snapshot.Kind.SCHEDULED:
        snapshots_retention(instance_id=instance.pk)


def snapshot_fail(*, snapshot_id: int, error: str, statuses: tuple = ()) -> None:
    """Settle a snapshot or restore that cannot finish (``OperationTask``'s ``fails``, or a permanent
    refusal). A snapshot being made fails (nothing was billed); a restore cut short leaves the snapshot
    READY, with why, and the instance's disk as it was (the provider swaps the copy in at the end)."""
    Snapshot.objects.filter(pk=snapshot_id, status=S.CREATING).update(status=S.FAILED, status_reason=error[:2000])
    Snapshot.objects.filter(pk=snapshot_id, status=S.RESTORING).update(status=S.READY, status_reason=error[:2000])


def snapshot_restore(*, snapshot: Snapshot, actor=None) -> Snapshot:
    """Put ``snapshot``'s content back on its instance's disk. The instance must be stopped (stop it
    first: what was written since the snapshot is lost, and a running machine would see its files
    change under it); it cannot start until the restore is done."""
    instance = snapshot.instance
    if snapshot.status == S.RESTORING:
        return snapshot  # asked twice: under way
    if snapshot.status != S.READY:
        raise OperationNotAllowed(_("Only a ready snapshot can be restored."))
    if instance.status != Instance.Status.STOPPED:
        raise OperationNotAllowed(_("Stop the instance before restoring a snapshot into it."))
    _check_supported(instance)
    with transaction.atomic():
        locked = Instance.objects.select_for_update().filter(pk=instance.pk).values_list("status", flat=True).first()
        if locked != Instance.Status.STOPPED:
            raise OperationNotAllowed(_("Stop the instance before restoring a snapshot into it."))
        if Snapshot.objects.filter(instance_id=instance.pk, status__in=(S.CREATING, S.RESTORING)).exists():
            raise OperationNotAllowed(_("A snapshot or restore of this instance is under way: wait for it to finish."))
        moved = Snapshot.objects.filter(pk=snapshot.pk, status=S.READY).update(
            status=S.RESTORING, progress=0, status_reason=""
        )
        if moved:
            if actor is not None:
                _audit(snapshot, actor, TeamEvent.Action.SNAPSHOT_RESTORED)
            enqueue_on_commit("instances.tasks.snapshot_restore_task", snapshot.pk)
    snapshot.refresh_from_db()
    return snapshot


def snapshot_restore_execute(*, snapshot_id: int) -> None:
    """The worker's half of a restore: the provider copies the snapshot over the stopped disk; then the
    snapshot is READY again with ``restored_at``. Only a RESTORING snapshot is acted on."""
    snapshot = Snapshot.objects.select_related("instance").filter(pk=snapshot_id).first()
    if snapshot is None or snapshot.status != S.RESTORING:
        return
    instance = snapshot.instance
    try:
        get_backend(instance.backend_alias).snapshot_restore(
            key=instance.key,
            state=instance.backend_state,
            snapshot=snapshot.slug,
            snapshot_state=snapshot.provider_state,
        )
    except PermanentBackendError as exc:
        snapshot_fail(snapshot_id=snapshot_id, error=str(exc))
        return
    Snapshot.objects.filter(pk=snapshot_id, status=S.RESTORING).update(
        status=S.READY, progress=100, restored_at=timezone.now(), status_reason=""
    )


def snapshot_delete(*, snapshot: Snapshot, actor=None) -> Snapshot:
    """Delete ``snapshot``: its meter closes now, the worker removes the copy. Refused while it is being
    made or restored; deleting twice is harmless. ``actor``: who asked (None: the schedule's retention)."""
    if snapshot.status in (S.CREATING, S.RESTORING):
        raise OperationNotAllowed(_("The snapshot is busy: delete it once it is ready or failed."))
    with transaction.atomic():
        moved = Snapshot.objects.filter(pk=snapshot.pk, status__in=(S.READY, S.FAILED)).update(status=S.DELETING)
        if moved:
            meter_stop(ref=snapshot_meter_ref(snapshot.pk))
            if actor is not None:
                _audit(snapshot, actor, TeamEvent.Action.SNAPSHOT_DELETED)
            enqueue_on_commit("instances.tasks.snapshot_delete_task", snapshot.pk)
    snapshot.refresh_from_db()
    return snapshot


def snapshot_delete_execute(*, snapshot_id: int) -> None:
    """The worker's half of a delete: the provider removes the copy (already gone is done); DELETED."""
    snapshot = Snapshot.objects.select_related("instance").filter(pk=snapshot_id).first()
    if snapshot is None or snapshot.status != S.DELETING:
        return
    instance = snapshot.instance
    if instance.status not in GONE and snapshot.size_bytes:
        try:
            get_backend(instance.backend_alias).snapshot_delete(
                key=instance.key,
                state=instance.backend_state,
                snapshot=snapshot.slug,
                snapshot_state=snapshot.provider_state,
            )
        except PermanentBackendError:
            logger.warning("the provider kept snapshot %s", snapshot.slug, exc_info=True)
    Snapshot.objects.filter(pk=snapshot_id, status=S.DELETING).update(status=S.DELETED)


def snapshots_end_with_instance(*, instance_id) -> int:
    """The instance is being released: its snapshots go with its disk (the provider deletes them with the
    machine). Their meters close now; returns how many were ended."""
    ended = 0
    with transaction.atomic():
        ids = list(
            Snapshot.objects.filter(instance_id=instance_id).exclude(status=S.DELETED).values_list("pk", flat=True)
        )
        for snapshot_id in ids:
            meter_stop(ref=snapshot_meter_ref(snapshot_id))
        if ids:
            ended = Snapshot.objects.filter(pk__in=ids).update(
                status=S.DELETED, status_reason=stored(gettext_noop("Deleted with its instance."))
            )
        SnapshotSchedule.objects.filter(instance_id=instance_id).delete()
    return ended


def snapshot_restoring(*, instance: Instance) -> bool:
    """Whether a restore into ``instance`` is under way (it may not start meanwhile)."""
    return Snapshot.objects.filter(instance_id=instance.pk, status=S.RESTORING).exists()


# --- the schedule ---------------------------------------------------------------------------------------


def snapshot_schedule_set(*, instance: Instance, every_hours: int | None, keep: int | None) -> SnapshotSchedule | None:
    """Take a snapshot of ``instance`` every ``every_hours`` hours, keeping the newest ``keep`` scheduled
    ones; ``every_hours`` None (or 0) turns the schedule off. The first one is due one period from now."""
    if instance.status in GONE:
        raise OperationNotAllowed(_("This instance no longer has a disk."))
    if not every_hours:
        SnapshotSchedule.objects.filter(instance=instance).delete()
        return None
    low, high = SCHEDULE_HOURS
    if not low <= int(every_hours) <= high:
        raise LaunchInvalid(_("Every 1 to 168 hours."), field="every_hours")
    keep = int(keep or 1)
    if not 1 <= keep <= settings.INSTANCES_SNAPSHOTS_MAX:
        raise LaunchInvalid(_("Keep 1 to %(n)d snapshots.") % {"n": settings.INSTANCES_SNAPSHOTS_MAX}, field="keep")
    _check_supported(instance)
    schedule, _created = SnapshotSchedule.objects.update_or_create(
        instance=instance,
        defaults={
            "every_hours": int(every_hours),
            "keep": keep,
            "next_at": timezone.now() + timedelta(hours=int(every_hours)),
        },
    )
    return schedule


def snapshots_scheduled(*, now=None) -> dict:
    """The beat's pass: take each due schedule's snapshot (its ``next_at`` moved forward first, by
    compare-and-set, so two ticks take one), skip an instance that cannot be snapshotted now (stopped
    for good, busy), and fail snapshots stuck past ``INSTANCES_SNAPSHOT_DEADLINE_S``."""
    now = now or timezone.now()
    deadline = now - timedelta(seconds=settings.INSTANCES_SNAPSHOT_DEADLINE_S)
    stuck = list(Snapshot.objects.filter(status=S.CREATING, created_at__lt=deadline).values_list("pk", flat=True))
    for snapshot_id in stuck:
        snapshot_fail(snapshot_id=snapshot_id, error=stored(gettext_noop("The snapshot did not finish in time.")))
    taken = skipped = 0
    for schedule in SnapshotSchedule.objects.filter(next_at__lte=now).select_related("instance"):
        claimed = SnapshotSchedule.objects.filter(pk=schedule.pk, next_at=schedule.next_at).update(
            next_at=now + timedelta(hours=schedule.every_hours)
        )
        if not claimed:
            continue  # another tick took it
        try:
            snapshot_create(instance=schedule.instance, kind=Snapshot.Kind.SCHEDULED, label="")
            taken += 1
        except (OperationNotAllowed, SnapshotLimitReached, SnapshotsNotSupported):
            skipped += 1
    return {"snapshots_taken": taken, "snapshots_skipped": skipped, "snapshots_failed": len(stuck)}


def snapshots_retention(*, instance_id) -> int:
    """Delete the oldest scheduled snapshots of ``instance_id`` beyond its schedule's ``keep``; returns
    how many. Manual snapshots are the owner's: never deleted here."""
    keep = SnapshotSchedule.objects.filter(instance_id=instance_id).values_list("keep", flat=True).first()
    if keep is None:
        return 0
    ready = Snapshot.objects.filter(instance_id=instance_id, kind=Snapshot.Kind.SCHEDULED, status=S.READY).order_by(
        F("created_at").desc(), "-pk"
    )
    deleted = 0
    for snapshot in list(ready[keep:]):
        snapshot_delete(snapshot=snapshot)
        deleted += 1
    return deleted
