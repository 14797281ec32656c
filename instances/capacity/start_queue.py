"""Waiting in line for cards: a start refused for lack of them, served by itself when cards free up.

A stopped instance whose start found no free cards can wait in line instead of being retried by hand
(``instance_start_or_wait``): it stays STOPPED with ``start_queued_at`` set. Whenever cards go back
(``instances.lifecycle._requeue_soon``) and at every reconciler pass, after the preempted instances
(they held their cards first), ``instances_start_queued`` walks each region and model's line in the
order people joined it and starts what fits through the ordinary start (quota, balance, placement), so
a queued start is refused exactly as one by hand would be. A refusal that is not for cards (balance,
quota, a limit) takes it out of the line with the reason, since waiting longer would not help.

First come, first served per region and model: when the head of a line does not fit, the rest of that
line waits behind it in that pass, so a large instance is not passed over for ever by small ones.

Any move out of STOPPED (a start by hand, a release) clears ``start_queued_at``
(``instances.lifecycle.instance_transition``), so it leaves the line with no step of its own.
"""

from __future__ import annotations

import logging

from django.db import connection, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from core.messages import reason as stored
from instances.capacity.preemption import _tell
from instances.errors import InstanceError, NoCapacity
from instances.models import Instance
from instances.services import instance_start
from notifications.models import Kind
from notifications.services import Message

logger = logging.getLogger(__name__)
S = Instance.Status


def instance_start_or_wait(*, instance: Instance, actor=None) -> Instance:
    """Start ``instance`` now, or, when no cards are free for it, put it in line (still STOPPED).

    Every other refusal (quota, balance, state) is raised as ``instance_start`` raises it. Asking again
    while in line keeps its place."""
    try:
        return instance_start(instance=instance, actor=actor)
    except NoCapacity:
        if instance.status != S.STOPPED:  # a preempted one already waits for cards by itself
            raise
    Instance.objects.filter(pk=instance.pk, status=S.STOPPED, start_queued_at__isnull=True).update(
        start_queued_at=timezone.now()
    )
    instance.refresh_from_db()  # not in line after all when it moved meanwhile (started or released)
    return instance


def instance_start_queue_leave(*, instance: Instance) -> Instance:
    """Take ``instance`` out of the line of starts; it stays as it is. Leaving twice is harmless."""
    Instance.objects.filter(pk=instance.pk, start_queued_at__isnull=False).update(start_queued_at=None)
    instance.refresh_from_db()
    return instance


def instances_start_queued() -> int:
    """Start queued instances where cards allow, first come first served per region and model; returns
    how many started. Safe with two passes at once: each instance is started under a lock only one holds."""
    started = 0
    blocked: set[tuple[int, int]] = set()  # lines whose head did not fit in this pass
    queued = (
        Instance.objects.select_related("gpu_model", "image", "region", "owner", "created_by")
        .filter(status=S.STOPPED, start_queued_at__isnull=False)
        .order_by("start_queued_at", "pk")
    )
    for instance in queued:
        line = (instance.region_id, instance.gpu_model_id)
        if line in blocked:
            continue
        try:
            outcome = _start_from_line(instance)
        except Exception:  # one provider or instance failing must not hold up the rest; the next pass retries
            logger.exception("starting %s from the line raised", instance.pk)
            continue
        if outcome is None:
            blocked.add(line)
        elif outcome:
            started += 1
    return started


def _claim(instance_id) -> bool:
    """This transaction's lock on starting ``instance_id`` from the line: False when another pass holds it.

    A try-lock that never waits, so it cannot deadlock with the quota and card locks the start takes."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0))", [f"start-queue:{instance_id}"])
        return bool(cursor.fetchone()[0])


def _start_from_line(instance: Instance) -> bool | None:
    """Start one queued instance: True when this pass started it, None when its line must wait in this
    pass (its cards are not free, or another pass is starting it right now: an instance behind it must
    not take the cards first), False when it is no longer in line (started, or taken out of it)."""
    with transaction.atomic():
        if not _claim(instance.pk):
            return None
        # After the lock, a fresh read: a pass that started it before us has committed by now.
        if not Instance.objects.filter(pk=instance.pk, status=S.STOPPED, start_queued_at__isnull=False).exists():
            return False
        try:
            instance_start(instance=instance, reason=stored(gettext_noop("Cards free: started from the line")))
        except NoCapacity:
            return None
        except InstanceError as exc:
            why = exc.message
            Instance.objects.filter(pk=instance.pk, status=S.STOPPED).update(
                start_queued_at=None,
                status_reason=stored(gettext_noop("Taken out of the line: %(r)s"), r=why),
            )
            _tell(
                instance,
                kind=Kind.START_QUEUE,
                render=lambda: Message(
                    title=_("%(name)s left the line for cards") % {"name": instance.name},
                    body=_("Your instance %(name)s could not start when cards freed up, so it left the line: %(r)s")
                    % {"name": instance.name, "r": why},
                ),
            )
            return False
        _tell(
            instance,
            kind=Kind.START_QUEUE,
            render=lambda: Message(
                title=_("%(name)s is starting") % {"name": instance.name},
                body=_(
                    "Cards freed up: your instance %(name)s, which was waiting in line, is starting. "
                    "Billing starts when it runs."
                )
                % {"name": instance.name},
            ),
        )
    return True
