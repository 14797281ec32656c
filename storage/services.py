"""The storage app's verbs: create, resize and delete volumes, attach and detach them, refresh usage.

Views, the API, Celery tasks and the instances app (at launch and at every boot) call these; nothing
else changes a volume. As for instances, an operation that needs the provider is split in two: the
request-time verb (``volume_create``) records the intent, moves the volume to its busy state and
enqueues a task on commit; the task's verb (``volume_create_execute``) talks to the backend and
finishes the move. Every status change goes through ``volume_transition`` (``core.statemachine``'s
compare-and-set, an event row and the billing meter in one transaction), so running a verb twice does
nothing more.

Billing: a volume is billed per GB-day (``volume-gb-day``, ``STORAGE_VOLUME_PRICE_FEN_PER_GB_DAY``)
from the moment the provider has made it until its deletion is requested, at the size the provider
has: a resize closes the meter and opens one at the new size when the provider has grown it. It is
storage, so running out of money does not stop it (billing keeps storage meters running; the debt is
collected on top-up), as with a stopped instance's disk.

Attachments take effect when the instance boots (launch, start, restart): ``volume_mounts_for_boot``
is what the instances app puts in the machine's spec, asked through ``instances.hooks.volumes`` and
answered in ``storage.wiring`` (instances imports nothing of storage).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from billing.models import Meter, Sku
from billing.services import InsufficientFunds, launch_check, meter_start, meter_stop, sku_upsert
from core.messages import reason as stored
from core.statemachine import transition, transition_table
from core.tasks import enqueue_on_commit
from instances.errors import FundsTooLow, LaunchInvalid, NotPermitted, OperationNotAllowed, QuotaExceeded
from instances.models import Instance, Region
from providers import PermanentBackendError, TransientBackendError, VolumeMount, get_backend
from storage.models import Volume, VolumeAttachment, VolumeEvent
from storage.selectors import (
    BOOTED_INSTANCE,
    DEAD_INSTANCE,
    SKU_CODE,
    region_supports_volumes,
    storage_quota_used,
    volume_meter_ref,
)
from teams.access import Access, resource_access
from teams.models import TeamEvent
from teams.services import team_event_record

logger = logging.getLogger(__name__)

V = Volume.Status
Mode = VolumeAttachment.Mode
IS = Instance.Status


# --- Errors: the instances app's, so a launch with volumes reports them like any other refusal ---------


class VolumeInvalid(LaunchInvalid):
    """A choice the user can correct (a 400 / a form error on ``field``)."""


class VolumeNotAllowed(OperationNotAllowed):
    """Not in the volume's (or the instance's) current state (a 409 ``invalid_state``)."""


class VolumeWriteForbidden(NotPermitted):
    """The person only sees this team volume (another member's): they may mount it read-only, never
    read-write (a 403 ``forbidden``)."""


class AttachmentConflict(OperationNotAllowed):
    """Another attachment of the volume forbids this one (a 409 ``attachment_conflict``)."""

    code = "attachment_conflict"


class StorageQuotaExceeded(QuotaExceeded):
    """Over the user's total volume size (``STORAGE_VOLUME_QUOTA_GB``)."""


# --- The state machine --------------------------------------------------------------------------------

ALLOWED = transition_table(
    {
        V.CREATING: {V.AVAILABLE, V.FAILED},
        V.AVAILABLE: {V.RESIZING, V.DELETING},
        # A resize that the provider refused goes back to available at the old size.
        V.RESIZING: {V.AVAILABLE},
        # A deletion that cannot finish fails (billing stays closed); deleting it again retries.
        V.DELETING: {V.DELETED, V.FAILED},
        V.DELETED: set(),
        V.FAILED: {V.DELETING},
    }
)


def volume_transition(*, volume_id, src: str, dst: str, reason: str = "", **changes) -> bool:
    """Move a volume from ``src`` to ``dst`` if it is still in ``src``; ``False`` if someone moved it first.

    In one transaction: the compare-and-set, the event row, the meter the new state implies, and any
    extra field ``changes``. A move ``ALLOWED`` does not have raises ``core.statemachine.InvalidTransition``.
    """
    now = timezone.now()

    def record() -> None:
        VolumeEvent.objects.create(volume_id=volume_id, old=src, new=dst, reason=reason, created_at=now)
        volume = Volume.objects.select_related("owner").get(pk=volume_id)
        _on_enter(volume=volume, dst=dst, at=now)

    return transition(
        model=Volume,
        pk=volume_id,
        table=ALLOWED,
        src=src,
        dst=dst,
        changes={"status_changed_at": now, "status_reason": reason, **changes},
        record=record,
    )


def _on_enter(*, volume: Volume, dst: str, at: datetime) -> None:
    """What entering ``dst`` means for billing. Runs once per transition (it follows the CAS)."""
    ref = volume_meter_ref(volume.pk)
    if dst == V.AVAILABLE:
        # Created, or resized: bill the size the provider has. A meter at another size closes and a
        # new one opens at the same instant, so every second is billed once, at one size.
        current = Meter.objects.filter(ref=ref, stopped_at__isnull=True).first()
        if current is not None and current.quantity != volume.size_gb:
            meter_stop(ref=ref, at=at)
        meter_start(
            user=volume.owner,
            sku=volume_sku_upsert(),
            quantity=volume.size_gb,
            ref=ref,
            description=f"{volume.name}: {volume.size_gb} GB volume",
            at=at,
        )
    elif dst == V.DELETING:
        meter_stop(ref=ref, at=at)


def volume_sku_upsert():
    """The volumes' SKU, priced from settings. Read-only when it is already right."""
    price = settings.STORAGE_VOLUME_PRICE_FEN_PER_GB_DAY
    sku = Sku.objects.filter(code=SKU_CODE).first()
    if sku is not None and sku.price_fen == price and sku.unit_seconds == 86400 and sku.is_storage:
        return sku
    # Storage: billing keeps it running when the money runs out (the files are what a user keeps).
    return sku_upsert(code=SKU_CODE, name="Volume", unit="GB-day", price_fen=price, unit_seconds=86400, is_storage=True)


def volume_daily_price(*, size_gb: int) -> int:
    return size_gb * settings.STORAGE_VOLUME_PRICE_FEN_PER_GB_DAY


def _enqueue(task_name: str, volume_id) -> None:
    """Run ``storage.tasks.<task_name>`` on the volume once this transaction commits (by name: the
    tasks module sits above this one)."""
    enqueue_on_commit(f"storage.tasks.{task_name}", str(volume_id))


def _get(volume_id) -> Volume | None:
    return Volume.objects.select_related("owner", "region").filter(pk=volume_id).first()


def _refuse(volume: Volume, message: str) -> None:
    """``message`` is a whole translated sentence with a ``%(status)s`` slot."""
    raise VolumeNotAllowed(message % {"status": volume.get_status_display()})


# --- Checks shared by create and resize --------------------------------------------------------------


def _size_check(size_gb: int) -> None:
    low, high = settings.STORAGE_VOLUME_MIN_GB, settings.STORAGE_VOLUME_MAX_GB
    if not isinstance(size_gb, int) or not (low <= size_gb <= high):
        raise VolumeInvalid(
            _("A volume is between %(min)d and %(max)d GB.") % {"min": low, "max": high}, field="size_gb"
        )


def _user_lock(user) -> None:
    """Serialise one user's volume changes: two creates at once cannot both fit under the quota."""
    list(get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk", flat=True))


def _quota_check(*, user, adding_gb: int, excluding=None) -> None:
    limit = settings.STORAGE_VOLUME_QUOTA_GB
    used = storage_quota_used(user=user, excluding=excluding)
    if used + adding_gb > limit:
        raise StorageQuotaExceeded(
            _(
                "Your volumes may hold %(limit)d GB together and %(used)d GB are in use, so %(n)d GB more would exceed it."
            )
            % {"limit": limit, "used": used, "n": adding_gb},
            field="size_gb",
        )


def _funds_check(*, user, adding_gb: int) -> None:
    # The runway check counts per hour; a day's price over 24, rounded up, never under-asks.
    hourly = -(-volume_daily_price(size_gb=adding_gb) // 24)
    try:
        launch_check(user=user, extra_hourly_fen=hourly)
    except InsufficientFunds as exc:
        raise FundsTooLow(str(exc)) from exc


# --- Create ----------------------------------------------------------------------------------------------


def _audit(*, actor, action: str, volume: Volume) -> None:
    """The team's audit event, when a person acts on a team's account (none in the personal context:
    no query either)."""
    if actor is not None and actor.pk != volume.owner_id:
        team_event_record(
            account=volume.owner_id, actor=actor, action=action, target=volume.name, details={"volume": str(volume.pk)}
        )


def volume_create(*, user, region: Region, name: str, size_gb: int, actor=None) -> Volume:
    """Validate and record a volume; a worker has the provider create it. Billing starts once it exists.

    ``user`` is the account that owns and pays for it (a person's, or a team's); ``actor`` the person
    who creates it (default: ``user``), who may change it later as the team's admins may.

    Refused before anything is created when the name, size or region is invalid, over the storage
    quota, or when the balance cannot pay for everything running plus this volume for the minimum runway.
    """
    name = (name or "").strip()
    if not name:
        raise VolumeInvalid(_("Give the volume a name."), field="name")
    if len(name) > 64:
        raise VolumeInvalid(_("Names are at most 64 characters."), field="name")
    _size_check(size_gb)
    if not region.is_active or not region_supports_volumes(region):
        raise VolumeInvalid(_("Volumes are not offered in that region."), field="region")
    with transaction.atomic():
        _user_lock(user)
        if Volume.objects.filter(owner=user, name=name).exclude(status__in=(V.DELETED, V.FAILED)).exists():
            raise VolumeInvalid(_("You already have a volume named %(name)s.") % {"name": name}, field="name")
        _quota_check(user=user, adding_gb=size_gb)
        _funds_check(user=user, adding_gb=size_gb)
        now = timezone.now()
        actor = actor or user
        volume = Volume.objects.create(
            owner=user,
            created_by=actor,
            region=region,
            name=name,
            size_gb=size_gb,
            backend_alias=region.backend_alias,
            status=V.CREATING,
            created_at=now,
            status_changed_at=now,
        )
        VolumeEvent.objects.create(
            volume=volume,
            old="",
            new=V.CREATING,
            reason=stored(gettext_noop("Created by %(who)s"), who=actor.email),
            created_at=now,
        )
        _audit(actor=actor, action=TeamEvent.Action.VOLUME_CREATED, volume=volume)
        _enqueue("volume_create_task", volume.pk)
    return volume


def volume_create_execute(*, volume_id) -> None:
    """Task body: have the provider create the volume (or find it: it is named by its key)."""
    volume = _get(volume_id)
    if volume is None or volume.status != V.CREATING:
        return
    backend = get_backend(volume.backend_alias)
    try:
        state = backend.volume_create(key=volume.key, size_gb=volume.size_gb, owner_ref=f"user-{volume.owner_id}")
    except PermanentBackendError as exc:
        volume_transition(
            volume_id=volume.pk,
            src=V.CREATING,
            dst=V.FAILED,
            reason=stored(gettext_noop("Creation failed: %(r)s"), r=str(exc)),
        )
        return
    volume_transition(
        volume_id=volume.pk,
        src=V.CREATING,
        dst=V.AVAILABLE,
        reason=stored(gettext_noop("Created")),
        backend_state=state,
    )


# --- Resize (up only) --------------------------------------------------------------------------------------


def volume_resize(*, volume: Volume, size_gb: int) -> Volume:
    """Grow a volume to ``size_gb``. The new size is billed from when the provider has grown it."""
    if volume.status == V.RESIZING and volume.resize_to_gb == size_gb:
        return volume  # a repeat
    if not volume.can_resize():
        _refuse(volume, _("A volume that is %(status)s cannot be resized."))
    _size_check(size_gb)
    if size_gb <= volume.size_gb:
        raise VolumeInvalid(
            _("A volume can only grow: choose more than its %(size)d GB.") % {"size": volume.size_gb}, field="size_gb"
        )
    with transaction.atomic():
        _user_lock(volume.owner)
        _quota_check(user=volume.owner, adding_gb=size_gb, excluding=volume)
        _funds_check(user=volume.owner, adding_gb=size_gb - volume.size_gb)
        if volume_transition(
            volume_id=volume.pk,
            src=V.AVAILABLE,
            dst=V.RESIZING,
            reason=stored(gettext_noop("Resizing from %(old)d to %(new)d GB"), old=volume.size_gb, new=size_gb),
            resize_to_gb=size_gb,
        ):
            _enqueue("volume_resize_task", volume.pk)
    volume.refresh_from_db()
    return volume


def volume_resize_execute(*, volume_id) -> None:
    """Task body: have the provider grow the volume, then bill the new size from now."""
    volume = _get(volume_id)
    if volume is None or volume.status != V.RESIZING or volume.resize_to_gb is None:
        return
    backend = get_backend(volume.backend_alias)
    try:
        state = backend.volume_resize(key=volume.key, state=volume.backend_state, size_gb=volume.resize_to_gb)
    except PermanentBackendError as exc:
        volume_transition(
            volume_id=volume.pk,
            src=V.RESIZING,
            dst=V.AVAILABLE,
            reason=stored(gettext_noop("Resize failed, the size is unchanged: %(r)s"), r=str(exc)),
            resize_to_gb=None,
        )
        return
    volume_transition(
        volume_id=volume.pk,
        src=V.RESIZING,
        dst=V.AVAILABLE,
        reason=stored(gettext_noop("Resized from %(old)d to %(new)d GB"), old=volume.size_gb, new=volume.resize_to_gb),
        size_gb=volume.resize_to_gb,
        resize_to_gb=None,
        backend_state=state,
    )


# --- Delete --------------------------------------------------------------------------------------------------


def _holding_attachments(volume: Volume):
    """Attachments that keep a volume: on a live instance, except a detach that a stopped instance finished."""
    return (
        volume.attachments.exclude(instance__status__in=DEAD_INSTANCE)
        .exclude(detach_requested_at__isnull=False, instance__status=IS.STOPPED)
        .select_related("instance")
    )


def volume_delete(*, volume: Volume, reason: str = "", actor=None) -> Volume:
    """Delete a volume and its files; billing closes now. Refused while an instance has it attached.

    ``actor``: the person who asked (for a team's audit log); None for the system's own deletions."""
    if volume.status in (V.DELETING, V.DELETED):
        return volume
    if not volume.can_delete():
        _refuse(volume, _("A volume that is %(status)s cannot be deleted."))
    with transaction.atomic():
        locked = Volume.objects.select_for_update().get(pk=volume.pk)
        holding = list(_holding_attachments(locked))
        if holding:
            names = ", ".join(sorted({a.instance.name for a in holding}))
            raise VolumeNotAllowed(
                _(
                    "%(volume)s is attached to %(instances)s. Detach it there first (a running instance keeps it "
                    "mounted until it is stopped or restarted)."
                )
                % {"volume": locked.name, "instances": names}
            )
        locked.attachments.all().delete()  # only attachments of gone instances or finished detaches are left
        if volume_transition(
            volume_id=locked.pk,
            src=locked.status,
            dst=V.DELETING,
            reason=reason or stored(gettext_noop("Deletion requested")),
        ):
            _audit(actor=actor, action=TeamEvent.Action.VOLUME_DELETED, volume=locked)
            _enqueue("volume_delete_task", locked.pk)
    volume.refresh_from_db()
    return volume


def volume_delete_execute(*, volume_id) -> None:
    """Task body: have the provider delete the volume (already gone counts as done)."""
    volume = _get(volume_id)
    if volume is None or volume.status != V.DELETING:
        return
    try:
        get_backend(volume.backend_alias).volume_destroy(key=volume.key, state=volume.backend_state)
    except PermanentBackendError as exc:
        # Its files may still be there: stay deleting (billing is closed) and say why; the periodic
        # task tries again.
        Volume.objects.filter(pk=volume.pk, status=V.DELETING).update(status_reason=str(exc)[:500])
        logger.warning("volume %s: delete refused by the provider: %s", volume.pk, exc)
        return
    volume_transition(
        volume_id=volume.pk, src=V.DELETING, dst=V.DELETED, reason=stored(gettext_noop("Deleted with its files"))
    )


# --- Attach and detach ---------------------------------------------------------------------------------------

_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")


def mount_path_clean(path: str) -> str:
    """The mount path in its one spelling (``/mnt/data``), or ``VolumeInvalid`` on ``mount_path``.

    Absolute, at or under one of ``STORAGE_MOUNT_ROOTS``, made of plain names (no ``..``, no ``.``,
    no empty segments, no spaces), at most 128 characters.
    """
    path = (path or "").strip()
    roots = ", ".join(settings.STORAGE_MOUNT_ROOTS)
    if not path.startswith("/"):
        raise VolumeInvalid(_("Give an absolute path, such as /mnt/data."), field="mount_path")
    if len(path) > 128:
        raise VolumeInvalid(_("Mount paths are at most 128 characters."), field="mount_path")
    parts = path.rstrip("/").split("/")[1:]
    if any(part in ("..", ".") for part in parts):
        raise VolumeInvalid(_("A mount path cannot contain '.' or '..'."), field="mount_path")
    if not parts or any(not _SEGMENT.match(part) for part in parts):
        raise VolumeInvalid(
            _("Use letters, digits, '.', '_' and '-' between single slashes, such as /mnt/data."), field="mount_path"
        )
    clean = "/" + "/".join(parts)
    if not any(clean == root or clean.startswith(root + "/") for root in settings.STORAGE_MOUNT_ROOTS):
        raise VolumeInvalid(_("Mount volumes at or under one of %(roots)s.") % {"roots": roots}, field="mount_path")
    return clean


def _paths_collide(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def _is_own(obj, user) -> bool:
    return obj.owner_id == user.pk


def _write_check(*, actor, volume: Volume, mode: str) -> None:
    """Refuse a writing mount of a volume ``actor`` may only see.

    In a team a member sees the others' volumes without operating them (``teams.access``); a read-write
    mount on their own instance would still let them overwrite or wipe a colleague's data, so it takes
    the same access as deleting the volume. Read-only is what seeing it allows. No ``actor``: the
    account itself (a personal volume, a system caller), nothing to check."""
    if actor is None or mode == Mode.READ_ONLY:
        return
    if resource_access(user=actor, owner_id=volume.owner_id, created_by_id=volume.created_by_id) < Access.OPERATE:
        raise VolumeWriteForbidden(
            _(
                "%(volume)s was created by another member of the team: attach it read-only, or ask them or a "
                "team admin to attach it read-write."
            )
            % {"volume": volume.name}
        )


def volume_attach(
    *, user, volume: Volume, instance: Instance, mount_path: str, mode: str = Mode.READ_WRITE, actor=None
):
    """Attach ``volume`` to ``instance`` at ``mount_path``; it is mounted at the instance's next boot.

    The rules: both the user's and in one region; one read-write attachment per volume among live
    instances, or any number of shared read-write ones where the backend shares writes (never both);
    read-only beside either; mount paths absolute, under the allowed roots, and not colliding with the
    instance's other mounts. Attaching again to the same instance updates the path and mode.

    ``user`` is the account (the acting principal); ``actor`` the person asking, who must operate the
    volume to mount it for writing (``_write_check``): a member attaches a colleague's team volume
    read-only.
    """
    # The account's own: a team's volume attaches to any of the team's instances (whoever launched it),
    # never to a personal one, and a personal volume never to a team's instance.
    if not (_is_own(volume, user) and _is_own(instance, user)):
        raise VolumeInvalid(_("Choose a volume and an instance of the same account."), field="volume")
    if mode not in Mode.values:
        raise VolumeInvalid(_("Choose read-write, read-only or shared read-write."), field="mode")
    _write_check(actor=actor, volume=volume, mode=mode)
    path = mount_path_clean(mount_path)
    if instance.status in DEAD_INSTANCE:
        raise VolumeNotAllowed(
            _("An instance that is %(status)s cannot take volumes.") % {"status": instance.get_status_display()}
        )
    if volume.region_id != instance.region_id:
        raise VolumeInvalid(
            _("%(volume)s is in %(vregion)s and %(instance)s in %(iregion)s: a volume is attached in its own region.")
            % {
                "volume": volume.name,
                "vregion": volume.region.name,
                "instance": instance.name,
                "iregion": instance.region.name,
            },
            field="instance",
        )
    with transaction.atomic():
        # The volume's row lock: two attaches of one volume are checked one after the other.
        locked = Volume.objects.select_for_update().select_related("region").get(pk=volume.pk)
        if not locked.can_attach():
            _refuse(locked, _("A volume that is %(status)s cannot be attached."))
        if mode == Mode.SHARED_READ_WRITE and not get_backend(locked.backend_alias).supports_shared_write:
            raise VolumeInvalid(
                _(
                    "Volumes in %(region)s can be written by one instance at a time: attach it read-write to one "
                    "instance and read-only to the others."
                )
                % {"region": locked.region.name},
                field="mode",
            )
        others = [a for a in _holding_attachments(locked) if a.instance_id != instance.pk]
        writers = [a for a in others if a.mode in (Mode.READ_WRITE, Mode.SHARED_READ_WRITE)]
        if mode == Mode.READ_WRITE and writers:
            raise AttachmentConflict(
                _(
                    "%(volume)s is attached for writing to %(instance)s. Attach it read-only here, or detach it "
                    "there first."
                )
                % {"volume": locked.name, "instance": writers[0].instance.name}
            )
        exclusive = [a for a in others if a.mode == Mode.READ_WRITE]
        if mode == Mode.SHARED_READ_WRITE and exclusive:
            raise AttachmentConflict(
                _(
                    "%(volume)s is attached read-write (not shared) to %(instance)s: detach it there, or attach it "
                    "there as shared read-write too."
                )
                % {"volume": locked.name, "instance": exclusive[0].instance.name}
            )
        mine = (
            VolumeAttachment.objects.filter(instance=instance, detach_requested_at__isnull=True)
            .exclude(volume=locked)
            .select_related("volume")
        )
        for other in mine:
            if _paths_collide(path, other.mount_path):
                raise VolumeInvalid(
                    _("%(path)s collides with %(other)s, where %(volume)s is mounted on this instance.")
                    % {"path": path, "other": other.mount_path, "volume": other.volume.name},
                    field="mount_path",
                )
        attachment, _created = VolumeAttachment.objects.update_or_create(
            volume=locked,
            instance=instance,
            defaults={"mount_path": path, "mode": mode, "detach_requested_at": None},
        )
    return attachment


def volume_detach(*, attachment: VolumeAttachment) -> VolumeAttachment | None:
    """Detach: at once from an instance that is not booted; from a booted one at its next boot or stop.

    Returns the attachment while it is still mounted (detach pending), None when it is gone.
    """
    instance = attachment.instance
    if instance.status in BOOTED_INSTANCE:
        if attachment.detach_requested_at is None:
            VolumeAttachment.objects.filter(pk=attachment.pk).update(detach_requested_at=timezone.now())
            attachment.refresh_from_db()
        return attachment
    VolumeAttachment.objects.filter(pk=attachment.pk).delete()
    return None


def volume_attachments_at_launch(*, user, instance: Instance, volumes: Iterable) -> None:
    """Attach ``volumes`` (``(volume, mount_path, mode)`` triples) to an instance being launched.

    Called by ``instances.services.instance_launch`` (through ``instances.hooks.volumes``) inside its transaction,
    before the machine is created: a refusal rolls the whole launch back, and the machine boots with
    them mounted. The launcher (``instance.created_by``) is the actor: a colleague's team volume is
    mounted read-only or not at all.
    """
    for volume, mount_path, mode in volumes:
        volume_attach(
            user=user, volume=volume, instance=instance, mount_path=mount_path, mode=mode, actor=instance.created_by
        )


def volume_mounts_for_boot(*, instance: Instance) -> tuple[VolumeMount, ...]:
    """The volumes machine ``instance`` mounts as it boots now; detaches requested while it ran finish here.

    Called when its spec is built (create, start, restart, repair). Only volumes that exist at the
    provider are mounted (a volume cannot be deleted while attached, so this is all of them in practice).
    """
    # One query on every boot (most instances have no volumes); a second only when a detach is due.
    rows = list(
        VolumeAttachment.objects.filter(instance=instance).select_related("volume").order_by("created_at", "id")
    )
    detached = [a.pk for a in rows if a.detach_requested_at is not None]
    if detached:
        VolumeAttachment.objects.filter(pk__in=detached).delete()
    return tuple(
        VolumeMount(
            key=a.volume.key, path=a.mount_path, read_only=a.mode == Mode.READ_ONLY, state=a.volume.backend_state
        )
        for a in rows
        if a.detach_requested_at is None and a.volume.status in Volume.MOUNTABLE
    )


# --- Usage, and the periodic repair ---------------------------------------------------------------------------


def volume_usage_refresh(*, volume: Volume, now: datetime | None = None) -> int | None:
    """Ask the provider how many bytes the volume's files take, and record it. None: it cannot tell now."""
    try:
        used = get_backend(volume.backend_alias).volume_usage(key=volume.key, state=volume.backend_state)
    except (TransientBackendError, PermanentBackendError):
        logger.warning("usage of volume %s unavailable", volume.pk, exc_info=True)
        return None
    if used is None:
        return None
    now = now or timezone.now()
    Volume.objects.filter(pk=volume.pk).update(used_bytes=used, usage_checked_at=now)
    volume.used_bytes, volume.usage_checked_at = used, now
    return used


def volumes_refresh(*, now: datetime | None = None) -> dict:
    """Periodic: settle volumes busy past their deadline, re-drive those whose task was lost, and
    measure every volume's usage.

    A volume busy for longer than ``INSTANCES_OPERATION_TIMEOUT_S`` is settled with why
    (``volumes_overdue``); one busy for longer than ``INSTANCES_REDRIVE_AFTER_S`` gets its task again
    (every task starts with its guard, so a task that was only slow does nothing twice). An error on
    one volume is logged and the others go on.
    """
    now = now or timezone.now()
    report = {"overdue": volumes_overdue(now=now), "redriven": 0, "measured": 0}
    stale = now - timedelta(seconds=getattr(settings, "INSTANCES_REDRIVE_AFTER_S", 60))
    tasks = {V.CREATING: "volume_create_task", V.RESIZING: "volume_resize_task", V.DELETING: "volume_delete_task"}
    for volume_id, status in Volume.objects.filter(status__in=Volume.BUSY, status_changed_at__lte=stale).values_list(
        "pk", "status"
    ):
        with transaction.atomic():
            _enqueue(tasks[status], volume_id)
        report["redriven"] += 1
    for volume in Volume.objects.filter(status__in=Volume.MOUNTABLE).iterator():
        try:
            measured = volume_usage_refresh(volume=volume, now=now)
        except Exception:
            logger.exception("usage of volume %s raised", volume.pk)
            continue
        if measured is not None:
            report["measured"] += 1
    return report


# --- Operations that cannot finish: a task that raised, a volume past its deadline -------------------------

# Where a volume settles when the operation under way cannot finish: a volume that was never made
# fails (nothing was billed: the meter opens at AVAILABLE); a resize goes back to the size the volume
# has (and is billed at); a deletion fails, its billing closed, so that deleting it again retries.
_SETTLES_AT = {V.CREATING: V.FAILED, V.RESIZING: V.AVAILABLE, V.DELETING: V.FAILED}
# A task's error, by the status it left the volume in. Whole sentences, as ``_refuse``'s.
_INTERNAL_ERROR = {
    V.CREATING: gettext_noop("Internal error while creating: %(error)s"),
    V.RESIZING: gettext_noop("Internal error while resizing: %(error)s. The size is unchanged."),
    V.DELETING: gettext_noop("Internal error while deleting: %(error)s. Delete it again to retry."),
}


def _overdue_reason(status: str) -> str:
    m = max(1, settings.INSTANCES_OPERATION_TIMEOUT_S // 60)
    if status == V.CREATING:
        return stored(gettext_noop("The provider did not create it within %(m)d minutes"), m=m)
    if status == V.RESIZING:
        return stored(gettext_noop("The resize did not finish within %(m)d minutes. The size is unchanged."), m=m)
    return stored(gettext_noop("The provider did not delete it within %(m)d minutes. Delete it again to retry."), m=m)


def _destroy_quietly(volume: Volume) -> None:
    """Make sure the provider keeps nothing of a volume that failed to be made."""
    try:
        get_backend(volume.backend_alias).volume_destroy(key=volume.key, state=volume.backend_state)
    except Exception:
        logger.warning("delete of failed volume %s at the provider failed", volume.pk, exc_info=True)


def _volume_abandon(*, volume: Volume, reason: str) -> bool:
    """Give up the operation ``volume`` is busy with and settle it where ``_SETTLES_AT`` says, with
    ``reason``, through ``volume_transition``. False when someone moved it first, or it is not busy."""
    status = volume.status
    if status == V.CREATING:
        moved = volume_transition(volume_id=volume.pk, src=status, dst=V.FAILED, reason=reason)
        if moved:
            _destroy_quietly(volume)
        return moved
    if status == V.RESIZING:
        return volume_transition(volume_id=volume.pk, src=status, dst=V.AVAILABLE, reason=reason, resize_to_gb=None)
    if status == V.DELETING:
        return volume_transition(volume_id=volume.pk, src=status, dst=V.FAILED, reason=reason)
    return False


def volume_operation_fail(*, volume_id, error: str, statuses=Volume.BUSY) -> bool:
    """A task working on the volume failed for good (``core.tasks.OperationTask``): settle it now,
    with ``error`` (the exception's class and message) in its reason. Only while it is in one of
    ``statuses``; True when it moved, and a repeat does nothing."""
    volume = _get(volume_id)
    if volume is None or volume.status not in statuses or volume.status not in _INTERNAL_ERROR:
        return False
    return _volume_abandon(volume=volume, reason=stored(_INTERNAL_ERROR[volume.status], error=error))


def volumes_overdue(*, now: datetime | None = None) -> int:
    """Settle every volume busy for longer than ``INSTANCES_OPERATION_TIMEOUT_S``; returns how many moved."""
    now = now or timezone.now()
    late = now - timedelta(seconds=settings.INSTANCES_OPERATION_TIMEOUT_S)
    settled = 0
    for volume in Volume.objects.filter(status__in=Volume.BUSY, status_changed_at__lte=late).order_by(
        "status_changed_at"
    ):
        try:
            moved = _volume_abandon(volume=volume, reason=_overdue_reason(volume.status))
        except Exception:
            logger.exception("could not settle overdue volume %s", volume.pk)
            continue
        if moved:
            settled += 1
            logger.warning("volume %s was %s past its deadline: settled", volume.pk, volume.status)
    return settled
