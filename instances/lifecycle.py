"""An instance's lifecycle: the statuses it may move between, and the one way it moves.

``ALLOWED`` is the table of transitions; ``instance_transition`` is the only function that changes an
instance's status (a compare-and-set through ``core.statemachine``), and ``instance_events_write`` the
only one that writes its timeline: every status change, the rows of a launch, a repair in place and
news of its node go through it. What entering a status means for billing (meters) and capacity (cards
back to the node) happens here too, once per transition, in the same transaction.

``SETTLES_AT`` and the deadlines say where a busy instance goes when its operation cannot finish;
``instances.services`` carries that out (with the provider), and the reconciler applies it to every
instance past its deadline.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Least
from django.utils import timezone
from django.utils.translation import gettext_noop

from billing.services import meter_open, meter_stop
from core.live import notify_user
from core.messages import reason as stored
from core.statemachine import transition, transition_table
from core.tasks import enqueue_on_commit
from instances import hooks
from instances.models import Instance, InstanceEvent, Node
from instances.skus import (
    disk_meter_ref,
    disk_sku_upsert,
    gpu_meter_ref,
    gpu_sku_upsert,
    instance_shape,
    no_gpu_sku_upsert,
)

logger = logging.getLogger(__name__)

S = Instance.Status

ALLOWED = transition_table(
    {
        S.REQUESTED: {S.SCHEDULING, S.FAILED, S.RELEASING},
        S.SCHEDULING: {S.PROVISIONING, S.FAILED, S.RELEASING},
        S.PROVISIONING: {S.RUNNING, S.FAILED, S.LOST, S.RELEASING},
        # FAILED from running or restarting: a machine that keeps crashing (see ``services.sync._instance_repair``).
        # STARTING and PREEMPTED from running: its node failed and its disk follows it (a provider with
        # ``disk_follows_node_loss``): placed on a healthy node at once, or queued until one has room.
        S.RUNNING: {S.STOPPING, S.RESTARTING, S.RELEASING, S.LOST, S.FAILED, S.PREEMPTING, S.STARTING, S.PREEMPTED},
        S.RESTARTING: {S.RUNNING, S.STOPPING, S.RELEASING, S.LOST, S.FAILED},
        S.STOPPING: {S.STOPPED, S.RELEASING, S.LOST},
        S.STOPPED: {S.STARTING, S.RELEASING, S.LOST},
        # Interruptible: the grace period (checkpoint), then off with the disk kept; back to STARTING
        # by itself when capacity returns (``instances.capacity.preemption``), or stopped/released by its owner.
        S.PREEMPTING: {S.PREEMPTED, S.RELEASING, S.LOST},
        S.PREEMPTED: {S.STARTING, S.STOPPING, S.RELEASING, S.LOST},
        # A start that cannot complete (the provider refused) goes back to stopped, disk intact.
        S.STARTING: {S.RUNNING, S.STOPPED, S.RELEASING, S.LOST},
        S.RELEASING: {S.RELEASED},
        S.RELEASED: set(),
        S.FAILED: {S.RELEASING},
        S.LOST: {S.RELEASING},
    }
)
# Where the GPUs go back to the node, and where metering changes (see ``_on_enter``).
_FREES_GPUS = frozenset({S.STOPPED, S.RELEASED, S.FAILED, S.LOST, S.PREEMPTED})
# PREEMPTING closes the GPU meter at the second of preemption; nothing is billed while preempted (the
# cloud took the cards back, not the owner), and the meter opens again when it runs (RUNNING).
_CLOSES_GPU_METER = frozenset({S.STOPPING, S.RELEASING, S.FAILED, S.LOST, S.PREEMPTING, S.PREEMPTED})
_CLOSES_DISK_METER = frozenset({S.RUNNING, S.RELEASING, S.RELEASED, S.FAILED, S.LOST})


# --- The timeline ----------------------------------------------------------------------------------------


def instance_events_write(
    *, moves: Iterable[tuple[object, str, str, str]], at: datetime, kind: str = InstanceEvent.Kind.STATUS
) -> None:
    """Write one timeline row per ``(instance_id, old, new, reason)`` in ``moves``, all at ``at``.

    The only writer of ``InstanceEvent``: the rows are the history users see and the clock billing
    reads. ``kind`` is ``STATUS`` for a status change or a repair in place (``old == new``), ``NODE``
    for news of the node an instance runs on (its status unchanged, never counted as a crash).
    """
    InstanceEvent.objects.bulk_create(
        InstanceEvent(instance_id=instance_id, kind=kind, old=old, new=new, reason=reason, created_at=at)
        for instance_id, old, new, reason in moves
    )


def instance_notify(instance: Instance) -> None:
    """Tell the owner's open pages the instance changed (call it on commit). Best effort."""
    try:
        notify_user(
            user_id=instance.owner_id,
            payload={"type": "instance", "id": str(instance.pk), "status": instance.status},
        )
    except Exception:  # best effort: the page shows the truth on its next load
        logger.warning("live notify failed for instance %s", instance.pk, exc_info=True)


# --- The one way an instance moves ------------------------------------------------------------------------


def instance_transition(
    *, instance_id, src: str, dst: str, reason: str = "", booted: Instance | None = None, **changes
) -> bool:
    """Move an instance from ``src`` to ``dst`` if it is still in ``src``; ``False`` if someone moved it first.

    In one transaction: the compare-and-set, the event row, the meters and the cards the new state
    implies, and any extra field ``changes``. Browsers are told after the commit. A move ``ALLOWED``
    does not have raises ``core.statemachine.InvalidTransition``.

    ``booted``: on a move to RUNNING, the caller's copy of the instance (read with its owner and GPU
    model). The meter that opens there reads only what a launch fixed (owner, model, cards) and the
    name, so the copy serves instead of reading the row back: the hot path of every boot.
    """
    now = timezone.now()
    fields = {"status_changed_at": now, "status_reason": reason, **changes}
    if src == S.STOPPED:  # started (by hand or from the line), released, lost: it leaves the line of starts
        fields["start_queued_at"] = None
    if dst == S.RUNNING:
        fields["running_since"] = now
        if "entry_points" in changes:  # asked of the machine that just booted (instances.entry_points)
            fields["entry_points_at"] = now

    def record() -> None:
        instance_events_write(moves=[(instance_id, src, dst, reason)], at=now)
        if booted is not None and dst == S.RUNNING:
            instance = booted
            for name, value in {"status": dst, **fields}.items():
                setattr(instance, name, value)
        else:
            instance = Instance.objects.select_related("gpu_model", "owner").get(pk=instance_id)
        _on_enter(instance=instance, src=src, dst=dst, at=now)
        for hook in transition_hooks():
            hook(instance=instance, src=src, dst=dst)
        transaction.on_commit(lambda: instance_notify(instance))

    return transition(model=Instance, pk=instance_id, table=ALLOWED, src=src, dst=dst, changes=fields, record=record)


def transition_hooks() -> tuple[Callable, ...]:
    """``hooks.transition``: functions of higher apps called as ``hook(instance=, src=, dst=)`` inside
    each transition's transaction, after its event row (the marketplace tells a deployment's owner it
    is ready or failed)."""
    return hooks.transition.all()


def _on_enter(*, instance: Instance, src: str, dst: str, at: datetime) -> None:
    """What entering ``dst`` means for billing and capacity. Runs once per transition (it follows the CAS)."""
    # RUNNING -> STARTING: its node failed; the downtime until it runs elsewhere is not billed.
    if dst in _CLOSES_GPU_METER or (dst == S.STARTING and src == S.RUNNING):
        meter_stop(ref=gpu_meter_ref(instance.pk), at=at)
    # A disk meter is open only from STOPPED on; a fresh boot has none to close (the hot path).
    if dst in _CLOSES_DISK_METER and not (dst == S.RUNNING and src in (S.PROVISIONING, S.RESTARTING)):
        meter_stop(ref=disk_meter_ref(instance.pk), at=at)
    if dst == S.RUNNING:
        # No-GPU mode: one machine at the no-GPU price instead of the cards, under the same ref (so every
        # close above closes it too).
        meter_open(
            user=instance.owner,
            sku=no_gpu_sku_upsert()
            if instance.no_gpu
            else gpu_sku_upsert(gpu_model=instance.gpu_model, tier=instance.tier),
            quantity=1 if instance.no_gpu else instance.total_gpus,
            ref=gpu_meter_ref(instance.pk),
            description=f"{instance.name}: {instance_shape(instance)}",
            at=at,
        )
    if dst == S.STOPPED:
        meter_open(
            user=instance.owner,
            sku=disk_sku_upsert(),
            quantity=instance.disk_gb,
            ref=disk_meter_ref(instance.pk),
            description=f"{instance.name}: {instance.disk_gb} GB disk (stopped)",
            at=at,
        )
    if dst in _FREES_GPUS:
        instance_gpus_free(instance=instance)
        _requeue_soon(instance=instance)


def _requeue_soon(*, instance: Instance) -> None:
    """Cards went back to a node: if preempted instances or queued starts of that model wait in that
    region, have a worker try to place them now rather than at the reconciler's next pass (by name: tasks sit above)."""
    if instance.node_id is None and not instance.extra_nodes:
        return  # it held none (a preempted one that was released, a launch that never placed)
    waiting = Q(status=S.PREEMPTED) | Q(status=S.STOPPED, start_queued_at__isnull=False)
    if Instance.objects.filter(waiting, region_id=instance.region_id, gpu_model_id=instance.gpu_model_id).exists():
        enqueue_on_commit("instances.tasks.instances_requeue_task")


def instance_gpus_free(*, instance: Instance) -> None:
    """Give the instance's cards back to its nodes, once (also for a move to healthy nodes)."""
    # Clearing ``node`` (and a cluster's other nodes) first, conditionally, makes giving the cards back
    # happen exactly once.
    if instance.node_id and Instance.objects.filter(pk=instance.pk, node_id=instance.node_id).update(
        node=None, extra_nodes=[]
    ):
        # Capped at the node's size: the provider may have shrunk the node while the cards were out.
        if not instance.cards_held:
            return  # a no-GPU run took none
        Node.objects.filter(pk=instance.node_id).update(
            free_cards=Least(F("free_cards") + instance.cards_held, F("total_cards"))
        )
        if instance.extra_nodes:
            Node.objects.filter(backend_alias=instance.backend_alias, name__in=instance.extra_nodes).update(
                free_cards=Least(F("free_cards") + instance.cards_held, F("total_cards"))
            )


# --- Operations that cannot finish: where a busy instance settles, and when -------------------------------

# Where an instance settles when the operation under way cannot finish, by its busy status: a machine
# that never ran fails (nothing was billed: the GPU meter opens at RUNNING); one with a user's disk is
# stopped with the disk kept (FAILED or LOST would have the reconciler destroy the disk with the
# machine); a release is recorded as done, its billing already closed, and the reconciler destroys
# whatever the provider still has of it (leaked machines of released instances).
SETTLES_AT = {
    S.REQUESTED: S.FAILED,
    S.SCHEDULING: S.FAILED,
    S.PROVISIONING: S.FAILED,
    S.STARTING: S.STOPPED,
    S.RESTARTING: S.STOPPED,
    S.STOPPING: S.STOPPED,
    S.RELEASING: S.RELEASED,
    # The grace period's end was never acted on (``instances.capacity.preemption`` lost its task): off, disk kept.
    S.PREEMPTING: S.PREEMPTED,
}


def deadline_s(status: str) -> int:
    """How long an instance may stay in busy ``status`` before its operation is given up."""
    if status in (S.REQUESTED, S.SCHEDULING, S.PROVISIONING):
        return settings.INSTANCES_PROVISION_TIMEOUT_S
    if status == S.PREEMPTING:
        return getattr(settings, "INSTANCES_PREEMPTION_GRACE_S", 30) + settings.INSTANCES_OPERATION_TIMEOUT_S
    return settings.INSTANCES_OPERATION_TIMEOUT_S


def overdue_reason(status: str) -> str:
    """Why an instance busy in ``status`` past its deadline was settled."""
    m = max(1, deadline_s(status) // 60)
    if status in (S.REQUESTED, S.SCHEDULING):
        return stored(gettext_noop("Launch was interrupted"))
    if status == S.PROVISIONING:
        return stored(
            gettext_noop("Launch failed: %(r)s"),
            r=stored(gettext_noop("the machine did not boot within %(m)d minutes"), m=m),
        )
    if status == S.STARTING:
        return stored(gettext_noop("The machine did not start in time"))
    if status == S.RESTARTING:
        return stored(
            gettext_noop("The machine did not restart within %(m)d minutes. It is stopped; its disk is kept."), m=m
        )
    if status == S.PREEMPTING:
        return stored(
            gettext_noop(
                "The power-off after preemption was not confirmed in time. It is marked preempted; its disk is kept."
            )
        )
    if status == S.STOPPING:
        return stored(
            gettext_noop(
                "The provider did not confirm the stop within %(m)d minutes. It is marked stopped; its disk is kept."
            ),
            m=m,
        )
    return stored(
        gettext_noop(
            "The provider did not confirm the release within %(m)d minutes. It is marked released; the console "
            "keeps deleting it at the provider."
        ),
        m=m,
    )
