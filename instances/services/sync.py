"""Sync: compare the provider's truth with ours and move on (``instance_sync``), recover an instance whose
node failed, repair or give up on a machine that crashed, and settle operations that cannot finish (a
task that raised, an instance past its deadline).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Greatest, Least
from django.utils import timezone
from django.utils.translation import gettext_noop

from core.messages import reason as stored
from core.messages import shown
from instances.boot import boot_changes, boot_failed, node_image_cached
from instances.capacity.incidents import incident_credit
from instances.capacity.takeback import beneficiary_drive
from instances.entry_points import running_changes
from instances.errors import NoCapacity
from instances.lifecycle import (
    SETTLES_AT,
    deadline_s,
    instance_events_write,
    instance_gpus_free,
    instance_notify,
    instance_transition,
    overdue_reason,
)
from instances.models import Instance, InstanceEvent, Node
from instances.services.common import _UNDER_WAY, OPERATIONS, S, _destroy_quietly, _enqueue, _get, _spec, _stop_quietly
from instances.services.placement import _gpus_reserve_for, _gpus_reserve_nodes_for, _node_without_cards
from providers import Observed, PermanentBackendError, ProvisioningBackend, get_backend

logger = logging.getLogger(__name__)


def _launch_fail(*, instance: Instance, reason: str) -> None:
    if instance_transition(
        instance_id=instance.pk,
        src=S.PROVISIONING,
        dst=S.FAILED,
        reason=stored(gettext_noop("Launch failed: %(r)s"), r=reason),
    ):
        _destroy_quietly(instance)


def instance_sync(
    *, instance_id, instance: Instance | None = None, observation=None, redrive_allowed: bool = True
) -> bool:
    """Poll the provider and advance the instance; returns True when it should be polled again soon.

    Handles every state: a boot that finished, a machine the provider lost, an operation a dead task
    left half-done (re-driven after ``INSTANCES_REDRIVE_AFTER_S``), an operation that took too long.
    UNKNOWN (provider unreachable) changes nothing. ``instance`` saves a read when the caller has
    just loaded it (it must be current: the transitions below compare-and-set on its status anyway),
    and ``observation`` a poll when the caller has just made one.
    """
    instance = instance or _get(instance_id)
    if instance is None or instance.status in (S.RELEASED, S.FAILED, S.LOST):
        return False
    backend = get_backend(instance.backend_alias)
    if observation is None:
        observation = backend.poll(key=instance.key, state=instance.backend_state)
    _instance_observe(instance=instance, observation=observation)
    seen = observation.state
    status = instance.status
    age = (timezone.now() - instance.status_changed_at).total_seconds()
    # The operation's own task, just back from the provider, never re-drives itself (``redrive_allowed``
    # False): a slow stop would enqueue its own task again, and with eager tasks recurse.
    redrive = redrive_allowed and age >= getattr(settings, "INSTANCES_REDRIVE_AFTER_S", 60)
    gone_reason = observation.detail or stored(gettext_noop("the provider no longer has this machine"))
    if seen == Observed.UNKNOWN:
        return status in Instance.BUSY
    if seen == Observed.DEGRADED and status in (S.PROVISIONING, S.STARTING, S.RESTARTING, S.RUNNING):
        _instance_repair(instance=instance, detail=observation.detail)
        return status in Instance.BUSY
    overdue = age > deadline_s(status)
    if status in (S.REQUESTED, S.SCHEDULING):
        # Only inside the launch transaction; seen from outside it means that request died mid-way.
        if overdue:
            instance_abandon(instance=instance, reason=overdue_reason(status))
        return False
    if status in (S.PROVISIONING, S.STARTING, S.RESTARTING) and boot_failed(observation):
        # The image could not be pulled, or its container would not start: it never ran, so nothing
        # was billed; a launch fails (its machine destroyed), a start or restart ends stopped.
        reason = (
            stored(gettext_noop("Boot failed: %(r)s"), r=observation.detail)
            if observation.detail
            else stored(gettext_noop("Boot failed"))
        )
        instance_abandon(instance=instance, reason=reason)
        return False
    if status == S.PROVISIONING:
        if seen == Observed.RUNNING:
            node = instance.node.name if instance.node else ""
            instance_transition(
                instance_id=instance.pk,
                src=status,
                dst=S.RUNNING,
                reason=stored(gettext_noop("Booted on %(node)s"), node=node),
                booted=instance,
                # The provider's state as this worker knows it: a fresh create's is saved here.
                backend_state=instance.backend_state,
                **running_changes(backend=backend, instance=instance),
            )
            return False
        if overdue:
            instance_abandon(instance=instance, reason=overdue_reason(status))
            return False
        if seen == Observed.GONE and redrive:
            _enqueue("instance_provision_task", instance.pk)  # the create never happened: try again
        return True
    if status in (S.STARTING, S.RESTARTING):
        if seen == Observed.RUNNING:
            reason = stored(gettext_noop("Started") if status == S.STARTING else gettext_noop("Restarted"))
            instance_transition(
                instance_id=instance.pk,
                src=status,
                dst=S.RUNNING,
                reason=reason,
                booted=instance,
                **running_changes(backend=backend, instance=instance),
            )
            return False
        if seen == Observed.GONE and status == S.STARTING and backend.disk_follows_node_loss and not overdue:
            # Moved off a failed node (``_instance_recover``): the machine reads as gone until its start
            # boots it on the new one. Sent again, not marked lost; a machine truly gone is refused by
            # the provider's start (then stopped, and lost at the next sync) or settled at the deadline.
            if redrive:
                _enqueue(_UNDER_WAY[status].task, instance.pk)
            return True
        if seen == Observed.GONE:
            instance_transition(instance_id=instance.pk, src=status, dst=S.LOST, reason=gone_reason)
            return False
        if overdue:
            instance_abandon(instance=instance, reason=overdue_reason(status))
            return False
        # A start that never reached the provider is sent again. A restart is not: a machine that
        # runs reads as one that restarted (settled above), and one that is off cannot be restarted.
        if redrive and (seen == Observed.STOPPED and status == S.STARTING):
            _enqueue(_UNDER_WAY[status].task, instance.pk)
        return True
    if status == S.STOPPING:
        if seen == Observed.STOPPED:
            instance_transition(
                instance_id=instance.pk, src=status, dst=S.STOPPED, reason=stored(gettext_noop("Stopped; disk kept"))
            )
            return False
        if seen == Observed.GONE:
            instance_transition(instance_id=instance.pk, src=status, dst=S.LOST, reason=gone_reason)
            return False
        if overdue:
            instance_abandon(instance=instance, reason=overdue_reason(status))
            return False
        if redrive:
            _enqueue(_UNDER_WAY[status].task, instance.pk)
        return True
    if status == S.RELEASING:
        if seen == Observed.GONE:
            instance_transition(
                instance_id=instance.pk, src=status, dst=S.RELEASED, reason=stored(gettext_noop("Released"))
            )
            return False
        if overdue:
            instance_abandon(instance=instance, reason=overdue_reason(status))
            return False
        if redrive:
            _enqueue(_UNDER_WAY[status].task, instance.pk)
        return True
    if status == S.RUNNING and seen == Observed.GONE and _instance_recover(instance=instance, backend=backend):
        return True
    if status == S.RUNNING and seen == Observed.PREEMPTED:
        # The engine preempted it by itself (Slurm's partition preemption): billing stops now, its
        # cards go back, and the engine runs it again when it can (below: PREEMPTED, seen RUNNING).
        instance_transition(
            instance_id=instance.pk,
            src=status,
            dst=S.PREEMPTED,
            reason=observation.detail or stored(gettext_noop("Preempted by the provider; disk kept")),
        )
        return True
    if status == S.PREEMPTED and seen == Observed.RUNNING:
        _instance_resumed(instance=instance, backend=backend)
        return False
    if status in (S.RUNNING, S.STOPPED, S.PREEMPTED) and seen == Observed.GONE:
        instance_transition(instance_id=instance.pk, src=status, dst=S.LOST, reason=gone_reason)
    elif (
        status == S.STOPPED
        and seen in (Observed.RUNNING, Observed.PENDING, Observed.DEGRADED)
        and redrive
        # Read again just before: a start may have begun since this sync read the instance.
        and Instance.objects.filter(pk=instance.pk, status=S.STOPPED).exists()
    ):
        # Recorded stopped (a stop the provider never confirmed, given up at its deadline) but still
        # on: nobody pays for it and its cards count as free, so have the provider stop it again.
        logger.warning("instance %s is stopped but its machine is %s: stopping it again", instance.pk, seen)
        _stop_quietly(instance)
    elif (
        status == S.RUNNING
        and seen == Observed.STOPPED
        # Powered off behind our back: follow the provider so the GPUs stop being billed.
        and instance_transition(
            instance_id=instance.pk, src=status, dst=S.STOPPING, reason=stored(gettext_noop("Stopped by the provider"))
        )
    ):
        instance_transition(
            instance_id=instance.pk, src=S.STOPPING, dst=S.STOPPED, reason=stored(gettext_noop("Stopped; disk kept"))
        )
    return False


def _instance_resumed(*, instance: Instance, backend: ProvisioningBackend) -> None:
    """A preempted instance that the engine requeued runs again by itself (Slurm started the same
    job): the same machine, ID, addresses and disk. It takes its cards on the node(s) the engine
    chose (no capacity check: it already runs there), moves through STARTING, and its GPU meter
    opens now. A compare-and-set on PREEMPTED, so a second sync does nothing."""
    state = instance.backend_state or {}
    names = [state.get("node", "")] + [
        h.get("node", "") for h in state.get("hosts") or () if h.get("node") and h.get("node") != state.get("node")
    ]
    nodes = {n.name: n for n in Node.objects.filter(backend_alias=instance.backend_alias, name__in=names)}
    head = nodes.get(names[0])
    others = [name for name in names[1:] if name in nodes]
    where = ", ".join(name for name in names if name) or "?"
    with transaction.atomic():
        if not instance_transition(
            instance_id=instance.pk,
            src=S.PREEMPTED,
            dst=S.STARTING,
            reason=stored(gettext_noop("Requeued by the provider: running again on %(node)s"), node=where),
            node=head,
            extra_nodes=others,
        ):
            return
        taken = [n.pk for n in nodes.values()]
        Node.objects.filter(pk__in=taken).update(free_cards=Greatest(F("free_cards") - instance.cards_held, 0))
        instance.node, instance.node_id, instance.extra_nodes = head, head.pk if head else None, others
        instance.status = S.STARTING
        instance_transition(
            instance_id=instance.pk,
            src=S.STARTING,
            dst=S.RUNNING,
            reason=stored(gettext_noop("Started")),
            booted=instance,
            **running_changes(backend=backend, instance=instance),
        )


def _instance_recover(*, instance: Instance, backend: ProvisioningBackend) -> bool:
    """A running instance's machine went with a failed node: where its disk survives the node
    (``backend.disk_follows_node_loss``), restart it on healthy nodes with the same identity; a cluster
    moves as a whole, all or nothing. False (it is then marked lost, as before) where the disk cannot
    follow, or where every node it held is healthy (the machine went for another reason).

    The GPU meter closes at the failure's detection and opens when it runs again: the downtime is not
    billed. Without room now, it waits as PREEMPTED and restarts by itself when capacity returns.
    No quota or balance check: it is the same instance carrying on, not a new one.
    """
    names = instance.node_names
    if not backend.disk_follows_node_loss or not names:
        return False
    lost = set(names) - set(
        Node.objects.filter(backend_alias=instance.backend_alias, name__in=names, is_healthy=True).values_list(
            "name", flat=True
        )
    )
    if not lost:
        return False
    failed = ", ".join(sorted(lost))
    with transaction.atomic():
        locked = Instance.objects.select_for_update().filter(pk=instance.pk, status=S.RUNNING).first()
        if locked is None:
            return True  # another worker moved it first
        # Its nodes as the row says under the lock (a resize may have changed them since this sync read it).
        instance.node_id, instance.extra_nodes, instance.node_count = (
            locked.node_id,
            locked.extra_nodes,
            locked.node_count,
        )
        instance_gpus_free(instance=instance)  # its old cards, healthy nodes' included: all or nothing
        instance.node_id, instance.extra_nodes = None, []
        try:
            with transaction.atomic():
                if not instance.cards_held:  # a run without GPU: any healthy node of its region, no cards
                    changes = {"node": _node_without_cards(instance), "extra_nodes": [], "displaced_others": False}
                elif instance.node_count == 1:
                    node, displaced = _gpus_reserve_for(
                        region=instance.region,
                        gpu_model=instance.gpu_model,
                        count=instance.gpu_count,
                        tier=instance.tier,
                        instance_id=instance.pk,
                        owner_id=instance.owner_id,
                    )
                    changes = {"node": node, "extra_nodes": [], "displaced_others": displaced}
                else:
                    (head, *others), displaced = _gpus_reserve_nodes_for(
                        region=instance.region,
                        gpu_model=instance.gpu_model,
                        count=instance.gpu_count,
                        nodes=instance.node_count,
                        tier=instance.tier,
                        instance_id=instance.pk,
                        owner_id=instance.owner_id,
                    )
                    changes = {"node": head, "extra_nodes": [n.name for n in others], "displaced_others": displaced}
        except NoCapacity:
            instance_transition(
                instance_id=instance.pk,
                src=S.RUNNING,
                dst=S.PREEMPTED,
                reason=stored(
                    gettext_noop(
                        "Node %(node)s failed; its disk is kept. It restarts by itself when capacity returns."
                    ),
                    node=failed,
                ),
            )
            incident_credit(instance=instance, status=S.PREEMPTED, failed=failed)
            return True
        where = ", ".join([changes["node"].name, *changes["extra_nodes"]])
        instance_transition(
            instance_id=instance.pk,
            src=S.RUNNING,
            dst=S.STARTING,
            reason=stored(
                gettext_noop("Node %(node)s failed: restarting on %(new)s with the same disk and addresses"),
                node=failed,
                new=where,
            ),
            **changes,
        )
        incident_credit(instance=instance, status=S.STARTING, failed=failed)
        _enqueue(OPERATIONS["start"].task, instance.pk)
    logger.warning("instance %s: node %s failed; restarting on %s", instance.pk, failed, where)
    return True


def _instance_fenced_record(*, instance: Instance, fenced) -> None:
    """Put on the timeline, once each, the runs the provider fenced off: a run left on a node declared
    dead that stopped itself when the instance ran elsewhere (never two runs on one disk)."""
    for node, at in fenced:
        reason = stored(
            gettext_noop("The run left on node %(node)s was stopped: the instance runs on another node"), node=node
        )
        when = datetime.fromtimestamp(at, tz=timezone.get_current_timezone())
        if InstanceEvent.objects.filter(
            instance_id=instance.pk, kind=InstanceEvent.Kind.NODE, reason=reason, created_at=when
        ).exists():
            continue
        instance_events_write(
            moves=[(instance.pk, instance.status, instance.status, reason)], at=when, kind=InstanceEvent.Kind.NODE
        )
        logger.warning("instance %s: its run left on node %s was stopped", instance.pk, node)


def _instance_observe(*, instance: Instance, observation) -> None:
    """Record what a poll taught us without changing the status: the provider's new state (where a
    queued job landed, so the page shows its node and cards) and, while the instance waits, why
    ("Queued: position 2, reason Resources") as its status reason, pushed live to the owner's page.

    When the provider chose the node itself (Slurm places jobs), the instance follows it, cards and all.
    """
    changes = {}
    new_state = observation.backend_state
    if new_state is not None and new_state != instance.backend_state:
        changes["backend_state"] = new_state
    waiting = instance.status in (S.PROVISIONING, S.STARTING, S.RESTARTING) and observation.state == Observed.PENDING
    if waiting and observation.detail and observation.detail[:255] != instance.status_reason:
        changes["status_reason"] = observation.detail[:255]
    # The launch timeline: when each boot stage was first seen, and the image pull's progress.
    changes.update(boot_changes(instance=instance, observation=observation))
    _instance_fenced_record(instance=instance, fenced=observation.fenced)
    if not changes:
        return
    past_pull = "boot_stages" in changes and any(
        stage in changes["boot_stages"]["seen"] for stage in ("image_ready", "container_started", "servers_answering")
    )
    if Instance.objects.filter(pk=instance.pk, status=instance.status).update(**changes):
        for name, value in changes.items():
            setattr(instance, name, value)
        transaction.on_commit(lambda: instance_notify(instance))
        if past_pull:
            node_image_cached(instance=instance)
    placed = (new_state or {}).get("node")
    if not (placed and instance.node_id and instance.node) or instance.status == S.PREEMPTING:
        # Preempting, a cluster's cards are split by the console (those taken are the new work's, the
        # rest go back when it is off: ``instances.capacity.takeback``): the provider's hosts are not followed.
        return
    if instance.node_count > 1:
        # A cluster: the provider's hosts, head first (Slurm reports every rank's node).
        names = [placed] + [
            h.get("node", "") for h in (new_state or {}).get("hosts") or () if h.get("node") and h["node"] != placed
        ]
        if len(names) == instance.node_count and names != instance.node_names:
            _instance_nodes_follow(instance=instance, names=names)
    elif placed != instance.node.name:
        _instance_node_follow(instance=instance, name=placed)


def _instance_node_follow(*, instance: Instance, name: str) -> None:
    """Move the instance's cards from the node the console picked to the node the provider used.

    No capacity check: the provider already runs it there. Compare-and-set on ``node`` so a repeat
    (or a concurrent poll) moves the cards once.
    """
    target = Node.objects.filter(backend_alias=instance.backend_alias, name=name).first()
    if target is None or target.pk == instance.node_id:
        return
    with transaction.atomic():
        if Instance.objects.filter(pk=instance.pk, node_id=instance.node_id).update(node=target):
            Node.objects.filter(pk=instance.node_id).update(
                free_cards=Least(F("free_cards") + instance.cards_held, F("total_cards"))
            )
            Node.objects.filter(pk=target.pk).update(free_cards=F("free_cards") - instance.cards_held)
    instance.node = target
    instance.node_id = target.pk


def _instance_nodes_follow(*, instance: Instance, names: list[str]) -> None:
    """A cluster's ``_instance_node_follow``: its cards move from the nodes the console picked to the
    ``names`` the provider used (head first), on the nodes that changed only.

    Compare-and-set on the head and the other nodes together, so a repeat moves the cards once.
    """
    targets = {
        n.name: n for n in Node.objects.filter(backend_alias=instance.backend_alias, name__in=names).only("pk", "name")
    }
    if len(targets) != len(set(names)) or len(set(names)) != len(names):
        return  # a node the console does not know (yet): follow at a later poll, after nodes_sync
    old = instance.node_names
    head, extra = targets[names[0]], names[1:]
    leaving = [n for n in old if n not in names]
    arriving = [n for n in names if n not in old]
    with transaction.atomic():
        moved = Instance.objects.filter(
            pk=instance.pk, node_id=instance.node_id, extra_nodes=list(instance.extra_nodes or [])
        ).update(node=head, extra_nodes=extra)
        if moved:
            Node.objects.filter(backend_alias=instance.backend_alias, name__in=leaving).update(
                free_cards=Least(F("free_cards") + instance.gpu_count, F("total_cards"))
            )
            Node.objects.filter(backend_alias=instance.backend_alias, name__in=arriving).update(
                free_cards=F("free_cards") - instance.gpu_count
            )
    instance.node, instance.node_id, instance.extra_nodes = head, head.pk, extra


def _instance_repair(*, instance: Instance, detail: str) -> None:
    """A part of the machine died (a user server crashed): have the provider start it again, and say so
    on the timeline; once it has died ``INSTANCES_CRASH_LIMIT`` times within ``INSTANCES_CRASH_WINDOW_S``,
    fail the instance with why instead of restarting it for ever (billing stops, the cards go back).

    A repair is an event from the instance's status to itself; counting those in the window counts
    the crashes, across workers and restarts of the console.
    """
    status = instance.status
    now = timezone.now()
    detail = detail or stored(gettext_noop("A process of the machine stopped unexpectedly"))
    crashes = InstanceEvent.objects.filter(
        instance_id=instance.pk,
        kind=InstanceEvent.Kind.STATUS,
        old=status,
        new=status,
        created_at__gte=now - timedelta(seconds=settings.INSTANCES_CRASH_WINDOW_S),
    ).count()
    if crashes + 1 >= settings.INSTANCES_CRASH_LIMIT and status == S.PROVISIONING:
        reason = stored(
            gettext_noop("it kept crashing while starting (crashes: %(n)d): %(detail)s"), n=crashes + 1, detail=detail
        )
        _instance_give_up(instance=instance, reason=reason)
        return
    if crashes + 1 >= settings.INSTANCES_CRASH_LIMIT:
        reason = stored(
            gettext_noop("Stopped after repeated crashes (%(n)d in %(m)d minutes), disk kept: %(detail)s"),
            n=crashes + 1,
            m=max(1, settings.INSTANCES_CRASH_WINDOW_S // 60),
            detail=detail,
        )
        _instance_give_up(instance=instance, reason=reason)
        return
    backend = get_backend(instance.backend_alias)
    try:
        state = backend.start(
            key=instance.key,
            state=instance.backend_state,
            node=instance.node.name if instance.node else "",
            spec=_spec(instance),
        )
    except PermanentBackendError as exc:
        _instance_give_up(
            instance=instance,
            reason=stored(gettext_noop("%(detail)s; restarting it failed: %(r)s"), detail=detail, r=str(exc)),
        )
        return
    with transaction.atomic():
        # Restarted, its servers may listen elsewhere: the saved entry points are asked again.
        if Instance.objects.filter(pk=instance.pk, status=status).update(backend_state=state, entry_points_at=None):
            repaired = stored(gettext_noop("%(detail)s; restarted it"), detail=detail)
            instance_events_write(moves=[(instance.pk, status, status, repaired)], at=now)
            transaction.on_commit(lambda: instance_notify(instance))
    logger.warning("instance %s: %s; restarted", instance.pk, shown(detail))


def _instance_give_up(*, instance: Instance, reason: str) -> None:
    """A machine that keeps breaking is stopped with why: GPUs freed, billing down to the disk, and
    the disk kept, so the user's work survives and a start (after a fix) can bring it back.

    Failing it instead would destroy the disk with the machine: a crashing server is no reason to
    lose a user's data.
    """
    if instance.status == S.PROVISIONING:
        # It never ran (a deployment's app that dies on start): the launch failed, nothing was billed,
        # and there is no user data on a disk that was made for it moments ago.
        _launch_fail(instance=instance, reason=reason)
    elif instance.status == S.STARTING:
        _stop_quietly(instance)
        instance_transition(instance_id=instance.pk, src=S.STARTING, dst=S.STOPPED, reason=reason)
    elif instance_transition(instance_id=instance.pk, src=instance.status, dst=S.STOPPING, reason=reason):
        _stop_quietly(instance)
        instance_transition(instance_id=instance.pk, src=S.STOPPING, dst=S.STOPPED, reason=reason)


_PROVISIONING_ERROR = gettext_noop("Internal error while provisioning: %(error)s")


# A task's error, by the status it left the instance in. Whole sentences: see ``_refuse``.
_INTERNAL_ERROR = {
    S.REQUESTED: _PROVISIONING_ERROR,
    S.SCHEDULING: _PROVISIONING_ERROR,
    S.PROVISIONING: _PROVISIONING_ERROR,
    S.STARTING: gettext_noop("Internal error while starting: %(error)s. It is stopped; its disk is kept."),
    S.RESTARTING: gettext_noop("Internal error while restarting: %(error)s. It is stopped; its disk is kept."),
    S.STOPPING: gettext_noop("Internal error while stopping: %(error)s. It is marked stopped; its disk is kept."),
    S.RELEASING: gettext_noop(
        "Internal error while releasing: %(error)s. It is marked released; the console keeps deleting it "
        "at the provider."
    ),
}


def instance_abandon(*, instance: Instance, reason: str) -> bool:
    """Give up the operation ``instance`` is busy with and settle it where ``lifecycle.SETTLES_AT`` says,
    with ``reason``. Through ``instance_transition`` (events, meters, cards); False when another worker
    moved it first, or when it is not busy.

    The provider is told first where the new status promises something of the machine (stopped: it is
    powered off before its cards go back), best effort: what it cannot do now the reconciler repeats.
    """
    status = instance.status
    dst = SETTLES_AT.get(status)
    if dst == S.FAILED:
        moved = instance_transition(instance_id=instance.pk, src=status, dst=S.FAILED, reason=reason)
        if moved:
            _destroy_quietly(instance)
        return moved
    if dst == S.RELEASED:
        _destroy_quietly(instance)
        return instance_transition(instance_id=instance.pk, src=status, dst=S.RELEASED, reason=reason)
    if dst == S.PREEMPTED:
        _stop_quietly(instance)
        moved = instance_transition(instance_id=instance.pk, src=status, dst=S.PREEMPTED, reason=reason)
        if moved and instance.preempted_for_id:
            beneficiary_drive(instance.preempted_for_id)
        return moved
    if dst == S.STOPPED:
        if status == S.RESTARTING:
            # It ran until now and was billed for it: the GPU meter closes here, as for any stop.
            if not instance_transition(instance_id=instance.pk, src=status, dst=S.STOPPING, reason=reason):
                return False
            status = S.STOPPING
        _stop_quietly(instance)
        return instance_transition(instance_id=instance.pk, src=status, dst=S.STOPPED, reason=reason)
    return False


def instance_operation_fail(*, instance_id, error: str, statuses=Instance.BUSY) -> bool:
    """A task working on the instance failed for good (``core.tasks.OperationTask``): settle it now,
    with ``error`` (the exception's class and message) in its reason, rather than leave it busy.

    Only while it is in one of ``statuses`` (those the task drives); True when it moved. Repeatable:
    a second call finds it settled and does nothing.
    """
    instance = _get(instance_id)
    if instance is None or instance.status not in statuses or instance.status not in _INTERNAL_ERROR:
        return False
    reason = stored(_INTERNAL_ERROR[instance.status], error=error)
    moved = instance_abandon(instance=instance, reason=reason)
    if moved:
        logger.warning("instance %s: %s", instance.pk, shown(reason))
    return moved
