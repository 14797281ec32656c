"""Preemption after the decision: the grace period with its checkpoint, the machine off, and the requeue.

``instances.capacity.takeback`` decides and moves the victims to PREEMPTING in the on-demand launch's own
transaction (billing stops there, at the second). Then, in workers:

1. ``instance_preemption_begin`` (at once): the owner is told (inbox and any open page) and the
   provider runs the instance's checkpoint command, if it has one.
2. ``instance_preemption_finish`` (once ``INSTANCES_PREEMPTION_GRACE_S`` has passed since the
   preemption): the provider powers the machine off, disk kept; the instance is PREEMPTED, and the
   on-demand instance that waited for its cards is driven on.
3. ``instances_requeue`` (whenever cards go back, and at every reconciler pass): each preempted
   instance, oldest first, is started again where free cards allow: same ID, URLs, SSH command and
   disk, since it is the same machine started on a node; its GPU meter opens when it runs.

Every step is a compare-and-set on the status, so a repeated task or a second worker does nothing more.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from core.messages import reason as stored
from instances.capacity.takeback import beneficiary_drive
from instances.errors import InstanceError
from instances.lifecycle import instance_transition
from instances.models import Instance
from instances.services import instance_start
from notifications.models import Kind
from notifications.services import Message, notify
from providers import Observed, PermanentBackendError, TransientBackendError, backend_aliases, get_backend

logger = logging.getLogger(__name__)
S = Instance.Status


def grace_s() -> int:
    """Seconds between the preemption and the machine going off: the checkpoint's time."""
    return int(getattr(settings, "INSTANCES_PREEMPTION_GRACE_S", 30))


def _tell(instance: Instance, *, kind: str, render) -> None:
    """The owner's inbox, e-mail and webhook (``notifications.notify``, in the owner's language) and a
    notice on their open pages; in a team, its owners and admins and the member who launched it."""
    notify(
        user=instance.owner,
        kind=kind,
        render=render,
        link=f"/instances/{instance.pk}/",
        data={"instance_id": str(instance.pk), "instance_name": instance.name},
        actor=instance.created_by,
    )


def instance_preemption_begin(*, instance_id) -> bool:
    """Task body, right after the preemption: warn the owner and start the checkpoint command.

    True when the checkpoint command was started at the provider. Only while PREEMPTING.
    """
    instance = (
        Instance.objects.select_related("owner", "created_by").filter(pk=instance_id, status=S.PREEMPTING).first()
    )
    if instance is None:
        return False
    started = False
    if instance.checkpoint_command:
        try:
            started = get_backend(instance.backend_alias).checkpoint(
                key=instance.key,
                state=instance.backend_state,
                command=instance.checkpoint_command,
                grace_s=grace_s(),
            )
        except PermanentBackendError:
            logger.warning("checkpoint of %s refused", instance.pk, exc_info=True)

    def render() -> Message:
        body = _(
            "Your interruptible instance %(name)s is being preempted: its GPUs are needed for on-demand work. "
            "Billing stopped now. It powers off in %(s)d seconds, keeping its disk, and restarts by itself "
            "with the same ID, addresses and SSH command when capacity returns."
        ) % {"name": instance.name, "s": grace_s()}
        if started:
            body += " " + _("Its checkpoint command is running: %(cmd)s") % {"cmd": instance.checkpoint_command}
        return Message(title=_("%(name)s is being preempted") % {"name": instance.name}, body=body)

    _tell(instance, kind=Kind.PREEMPTED, render=render)
    return started


def instance_preemption_finish(*, instance_id, now: datetime | None = None) -> bool:
    """Task body, after the grace period: power the machine off (disk kept) and mark it PREEMPTED.

    False when it is not due yet (``now`` before the grace period's end), or no longer PREEMPTING.
    """
    now = now or timezone.now()
    instance = Instance.objects.filter(pk=instance_id, status=S.PREEMPTING).first()
    if instance is None or now < instance.status_changed_at + timedelta(seconds=grace_s()):
        return False
    try:
        backend = get_backend(instance.backend_alias)
        if backend.requeues_preempted:  # queued at the provider, which boots it again itself
            backend.requeue(key=instance.key, state=instance.backend_state)
        else:
            backend.stop(key=instance.key, state=instance.backend_state)
    except PermanentBackendError as exc:
        # The machine is gone (its node failed meanwhile): its disk went with it.
        moved = instance_transition(instance_id=instance.pk, src=S.PREEMPTING, dst=S.LOST, reason=str(exc))
    else:
        moved = instance_transition(
            instance_id=instance.pk,
            src=S.PREEMPTING,
            dst=S.PREEMPTED,
            reason=stored(
                gettext_noop("Preempted after a %(s)d-second grace period; disk kept, waiting for capacity"),
                s=grace_s(),
            ),
        )
    if moved and instance.preempted_for_id:
        beneficiary_drive(instance.preempted_for_id)
    return moved


def preemptions_finish_due(*, now: datetime | None = None) -> int:
    """The reconciler's net under the finish task: every PREEMPTING instance past its grace period."""
    now = now or timezone.now()
    due = Instance.objects.filter(
        status=S.PREEMPTING, status_changed_at__lte=now - timedelta(seconds=grace_s())
    ).values_list("pk", flat=True)
    finished = 0
    for pk in due:
        try:
            finished += instance_preemption_finish(instance_id=pk, now=now)
        except Exception:  # one provider refusing must not hold up the rest; the next pass tries again
            logger.exception("finishing the preemption of %s raised", pk)
    return finished


def _held_by_engines() -> dict[str, set[str] | None]:
    """Per alias whose provider ``requeues_preempted``: the keys of the machines it still holds (queued
    or running); None when it cannot be asked now (its preempted instances then wait for the next pass).
    A preempted instance the provider does not hold (its job was lost with its node, or cancelled) is
    the console's to start again."""
    held: dict[str, set[str] | None] = {}
    for alias in backend_aliases():
        backend = get_backend(alias)
        if not backend.requeues_preempted:
            continue
        try:
            held[alias] = {
                m.key
                for m in backend.machines()
                if m.observed in (Observed.PREEMPTED, Observed.PENDING, Observed.RUNNING, Observed.DEGRADED)
            }
        except (TransientBackendError, PermanentBackendError):
            held[alias] = None
    return held


def instances_requeue() -> int:
    """Start preempted instances again, oldest preemption first, where free cards allow; returns how many.

    Through the start operation (quota, balance, placement on free cards only: interruptible work
    never preempts), so a requeued instance is the same machine on a node, billed from when it runs.
    A shape that did not fit in a region is not tried again in this pass for instances as large.
    """
    started = 0
    refused: dict[
        tuple[int, int, int, bool], int
    ] = {}  # (region, model, nodes, no GPU) -> smallest card count that did not fit
    waiting = Instance.objects.select_related("gpu_model", "image", "region", "owner", "created_by").filter(
        status=S.PREEMPTED
    )
    held = _held_by_engines() if waiting.exists() else {}
    for instance in waiting.order_by("status_changed_at", "pk"):
        if instance.backend_alias in held and (
            held[instance.backend_alias] is None or instance.key in held[instance.backend_alias]
        ):
            continue  # the engine requeued it and boots it again itself: the sync follows it
        # A cluster's refusal is its own, and so is a run without GPU's (it asks for no cards).
        shape = (instance.region_id, instance.gpu_model_id, instance.node_count, instance.no_gpu)
        if instance.gpu_count >= refused.get(shape, 10**6):
            continue
        try:
            # As it ran: a run without GPU comes back without (it would take cards its owner never asked for).
            after = instance_start(
                instance=instance,
                reason=stored(gettext_noop("Capacity returned: restarting after preemption")),
                no_gpu=instance.no_gpu,
            )
        except InstanceError:  # no capacity, quota or balance now: it waits for the next pass
            refused[shape] = min(refused.get(shape, 10**6), instance.gpu_count)
            continue
        if after.status == S.STARTING:
            started += 1
            _tell(
                instance,
                kind=Kind.RECOVERED,
                render=lambda instance=instance: Message(
                    title=_("%(name)s is restarting after preemption") % {"name": instance.name},
                    body=_(
                        "Capacity returned: your instance %(name)s is starting again with its disk, ID, addresses "
                        "and SSH command. Billing restarts when it runs."
                    )
                    % {"name": instance.name},
                ),
            )
    return started
