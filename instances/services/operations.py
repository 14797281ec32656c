"""Operations: stop, start, restart and release. The request-time verb (``instance_stop``) moves the
instance to the operation's busy status and enqueues its task on commit; the task's verb
(``instance_operation_execute``) talks to the provider and finishes the move. Also rename, and the stop
of every machine of an account whose money ran out.
"""

from __future__ import annotations

from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from billing.alerts import meters_stop_unpaid
from core.messages import reason as stored
from instances.errors import LaunchInvalid, NoGpuNotSupported
from instances.lifecycle import instance_notify, instance_transition
from instances.models import Instance
from instances.services.common import (
    OPERATIONS,
    Operation,
    S,
    _enqueue,
    _get,
    _operation_name,
    _refuse,
    _secret_choices_write,
)
from instances.services.fleet import _nodes_ensure
from instances.services.placement import _instance_place
from instances.services.snapshots import snapshot_restoring, snapshots_end_with_instance
from instances.services.sync import instance_sync
from providers import PermanentBackendError, get_backend
from teams.models import TeamEvent
from teams.services import team_event_record

# The team audit event of each operation a person asks for (stop, start, release; not restart).
_TEAM_EVENTS = {
    "stop": TeamEvent.Action.INSTANCE_STOPPED,
    "start": TeamEvent.Action.INSTANCE_STARTED,
    "release": TeamEvent.Action.INSTANCE_RELEASED,
}


def _operation_request(
    op: Operation, *, instance: Instance, reason: str, actor=None, no_gpu: bool | None = None
) -> Instance:
    """Ask for ``op``: refused in a status it cannot start from, nothing more when under way or done.

    ``actor``: the person asking (None: the console itself, e.g. auto-stop). In a team the move is
    written to the team's audit log in the same transaction. ``no_gpu`` (an operation that places): run
    without cards (True) or with them (False), recorded on the instance with the placement."""
    if instance.status in op.done:
        return instance
    if instance.status not in op.sources:
        _refuse(instance, _(op.refused))
    if op.places:
        _nodes_ensure(region=instance.region)
    with transaction.atomic():
        changes, params = {}, {}
        if op.places:
            instance.no_gpu = bool(no_gpu)  # what placement, the meter and the spec read (``cards_held``)
            changes = {**_instance_place(instance), "no_gpu": instance.no_gpu}
            params["node"] = ", ".join([changes["node"].name, *changes.get("extra_nodes", [])])
        moved = instance_transition(
            instance_id=instance.pk,
            src=instance.status,
            dst=op.busy,
            reason=reason or stored(op.requested, **params),
            **changes,
        )
        if moved:
            _enqueue(op.task, instance.pk)
            action = _TEAM_EVENTS.get(_operation_name(op))
            if action and actor is not None and actor.pk != instance.owner_id:
                team_event_record(
                    account=instance.owner_id,
                    actor=actor,
                    action=action,
                    target=instance.name,
                    details={"instance": str(instance.pk)},
                )
        elif changes:  # someone else started (or released) it first: give the cards back
            transaction.set_rollback(True)
    instance.refresh_from_db()
    return instance


def instance_operation_execute(*, instance_id, operation: str) -> None:
    """Task body of ``OPERATIONS[operation]``: have the provider do it, then finish the move (or poll
    until the provider's truth finishes it). Only while the instance is busy with it: a repeat does nothing."""
    op = OPERATIONS[operation]
    instance = _get(instance_id)
    if instance is None or instance.status != op.busy:
        return
    if (
        op.places
        and instance.displaced_others
        and Instance.objects.filter(preempted_for=instance.pk, status=S.PREEMPTING).exists()
    ):
        return  # as ``instance_provision``: the machines it preempts are still in their grace period
    try:
        state = op.provider(get_backend(instance.backend_alias), instance)
    except PermanentBackendError as exc:
        if op.refusal is None:
            raise
        dst, why = op.refusal
        reason = stored(why, r=str(exc)) if why else str(exc)
        instance_transition(instance_id=instance.pk, src=op.busy, dst=dst, reason=reason)
        return
    if state is not None:
        Instance.objects.filter(pk=instance.pk, status=op.busy).update(backend_state=state)
    if op.then is not None:
        dst, why = op.then
        instance_transition(instance_id=instance.pk, src=op.busy, dst=dst, reason=stored(why))
    else:
        instance_sync(instance_id=instance.pk, redrive_allowed=False)


def instance_stop(*, instance: Instance, reason: str = "", actor=None) -> Instance:
    """Stop a running instance: GPUs freed, disk kept (and billed as storage). Stopping twice is harmless."""
    return _operation_request(OPERATIONS["stop"], instance=instance, reason=reason, actor=actor)


def instance_start(*, instance: Instance, reason: str = "", actor=None, no_gpu: bool = False) -> Instance:
    """Start a stopped instance: it needs cards again (placement, quota, balance), or stays stopped with why.

    ``no_gpu``: start it without cards (no-GPU mode: the same disk and image, a small CPU/RAM allowance,
    the no-GPU price; no quota). A single machine only: a cluster is refused. Switching modes is a stop
    and a start; a normal start takes its cards again."""
    if no_gpu and instance.node_count > 1:
        raise NoGpuNotSupported(
            _("A cluster cannot start without GPUs: its nodes work together on their cards. Start it normally.")
        )
    if no_gpu and instance.status not in (S.STOPPED, S.PREEMPTED):
        if instance.no_gpu and instance.status in (S.STARTING, S.RUNNING):
            return instance  # asked twice: already under way, or done
        _refuse(instance, _("Only a stopped instance can start without GPU; this one is %(status)s."))
    if instance.status in (S.STOPPED, S.PREEMPTED) and snapshot_restoring(instance=instance):
        _refuse(instance, _("A snapshot is being restored into this instance: start it once the restore is done."))
    return _operation_request(OPERATIONS["start"], instance=instance, reason=reason, actor=actor, no_gpu=no_gpu)


def instance_restart(*, instance: Instance, reason: str = "", actor=None) -> Instance:
    """Reboot in place, keeping the GPUs (and their meter)."""
    return _operation_request(OPERATIONS["restart"], instance=instance, reason=reason, actor=actor)


def instance_release(*, instance: Instance, reason: str = "", actor=None) -> Instance:
    """Destroy the instance and its disk, its snapshots with it; billing closes now. Releasing twice is
    harmless."""
    with transaction.atomic():
        released = _operation_request(OPERATIONS["release"], instance=instance, reason=reason, actor=actor)
        if released.status in (S.RELEASING, S.RELEASED):
            snapshots_end_with_instance(instance_id=instance.pk)
    return released


def instance_rename(*, instance: Instance, name: str) -> Instance:
    name = (name or "").strip()
    if not name:
        raise LaunchInvalid(_("Give the instance a name."), field="name")
    if len(name) > 64:
        raise LaunchInvalid(_("Names are at most 64 characters."), field="name")
    if instance.status == S.RELEASED:
        _refuse(instance, _("An instance that is %(status)s cannot be renamed."))
    Instance.objects.filter(pk=instance.pk).update(name=name)
    instance.name = name
    transaction.on_commit(lambda: instance_notify(instance))
    return instance


def instance_secrets_set(*, instance: Instance, choices) -> Instance:
    """Choose the owner's secrets ``instance`` gets (``(secret, env)`` pairs; empty: none), replacing the
    previous choice. Allowed in any status but released: the machine reads its secrets when it boots,
    so a stopped one gets them at its start, a running one at its next restart (the page says so)."""
    if instance.status in (S.RELEASING, S.RELEASED, S.FAILED):
        _refuse(instance, _("The secrets of an instance that is %(status)s cannot be changed."))
    with transaction.atomic():
        Instance.objects.select_for_update().filter(pk=instance.pk).first()
        _secret_choices_write(instance=instance, choices=choices, replace=True)
    return instance


def instances_stop_for_funds(*, user_id: int) -> int:
    """Billing's out-of-funds hook: stop the user's running instances, keeping their disks.

    Then billing's default hook stops whatever else still bills compute (meters of other apps);
    storage, the stopped instances' disks included, keeps running. Returns the instances stopped.
    """
    stopped = 0
    for instance in Instance.objects.filter(owner_id=user_id, status__in=(S.RUNNING, S.RESTARTING)):
        instance_stop(
            instance=instance,
            reason=stored(
                gettext_noop("Stopped because the balance ran out; the disk is kept. Top up to start it again.")
            ),
        )
        stopped += 1
    meters_stop_unpaid(user_id=user_id)
    return stopped
