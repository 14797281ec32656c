"""Every running second billed exactly once: instances' GPU meters checked against their timelines.

The timeline (``InstanceEvent``) is what the owner sees: when the instance started running and when it
stopped. Billing is the meters that ``instances.lifecycle`` opens and closes at the same transitions,
and the ledger's usage postings. After faults (a worker killed mid-transition, Redis or PostgreSQL
restarted, the provider unreachable) the three must still agree: one meter per running stretch, opened
and closed when the stretch began and ended, settled to the second, and posted to the ledger once. The
chaos soak (``make soak``) runs this at its end; an operator can run it any time (``manage.py
usage_check``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise

from django.utils import timezone

from billing.meter_arithmetic import amount_owed, elapsed_seconds
from billing.models import Meter
from billing.selectors import meters_charged_in_ledger
from instances.models import Instance, InstanceEvent
from instances.skus import gpu_meter_ref

S = Instance.Status


@dataclass
class UsageAudit:
    instances: int = 0
    stretches: int = 0  # running stretches in the timelines
    running_s: int = 0  # their whole seconds, for the stretches that ended
    billed_s: int = 0  # the settled seconds of the meters that closed
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict:
        return {
            "instances": self.instances,
            "running_stretches": self.stretches,
            "running_s": self.running_s,
            "billed_s": self.billed_s,
            "problems": len(self.problems),
        }


def running_stretches(events: Iterable[InstanceEvent]) -> list[tuple[datetime, datetime | None]]:
    """(start, end) of each stretch the timeline shows the instance running; ``end`` None: it still is.

    A stretch opens at a status change into ``running`` and closes at the next status change out of it;
    a repair in place (``running → running``) and news about the node change nothing."""
    stretches: list[tuple[datetime, datetime | None]] = []
    start: datetime | None = None
    for event in events:
        if event.kind != InstanceEvent.Kind.STATUS or event.old == event.new:
            continue
        if event.new == S.RUNNING and start is None:
            start = event.created_at
        elif event.new != S.RUNNING and start is not None:
            stretches.append((start, event.created_at))
            start = None
    if start is not None:
        stretches.append((start, None))
    return stretches


def usage_audit(*, instances, tolerance_s: float = 1.0) -> UsageAudit:
    """Check ``instances`` (a queryset): their GPU meters against their timelines and the ledger."""
    audit = UsageAudit()
    tolerance = timedelta(seconds=tolerance_s)
    instances = list(instances.only("pk", "name"))
    refs = {gpu_meter_ref(i.pk): i for i in instances}
    meters: dict[str, list[Meter]] = {ref: [] for ref in refs}
    for meter in Meter.objects.filter(ref__in=refs).order_by("started_at", "pk"):
        meters[meter.ref].append(meter)
    events: dict = {i.pk: [] for i in instances}
    for event in InstanceEvent.objects.filter(instance_id__in=events).order_by("created_at", "pk"):
        events[event.instance_id].append(event)
    in_ledger = meters_charged_in_ledger(meter_ids=[m.pk for group in meters.values() for m in group])
    now = timezone.now()
    for ref, instance in refs.items():
        audit.instances += 1
        stretches, own = running_stretches(events[instance.pk]), meters[ref]
        audit.stretches += len(stretches)
        say = f"{instance.name} ({instance.pk})"
        if len(own) != len(stretches):
            audit.problems.append(f"{say}: {len(stretches)} running stretches, {len(own)} GPU meters")
        for (start, end), meter in zip(stretches, own, strict=False):
            if abs(meter.started_at - start) > tolerance:
                audit.problems.append(f"{say}: meter {meter.pk} opened at {meter.started_at}, running from {start}")
            if (end is None) != (meter.stopped_at is None):
                audit.problems.append(f"{say}: meter {meter.pk} stopped at {meter.stopped_at}, running until {end}")
            elif end is not None and abs(meter.stopped_at - end) > tolerance:
                audit.problems.append(f"{say}: meter {meter.pk} closed at {meter.stopped_at}, running until {end}")
            if end is not None:
                audit.running_s += elapsed_seconds(start=start, end=end)
        for before, after in pairwise(own):
            if before.stopped_at is None or before.stopped_at > after.started_at:
                audit.problems.append(f"{say}: meters {before.pk} and {after.pk} overlap: billed twice")
        for meter in own:
            if meter.stopped_at is None:
                # Still running: settled up to the last tick, never beyond now.
                if meter.settled_seconds > elapsed_seconds(start=meter.started_at, end=now):
                    audit.problems.append(f"{say}: open meter {meter.pk} settled past now")
                continue
            seconds = elapsed_seconds(start=meter.started_at, end=meter.stopped_at)
            audit.billed_s += meter.settled_seconds
            if meter.settled_seconds != seconds:
                audit.problems.append(f"{say}: meter {meter.pk} ran {seconds} s, settled {meter.settled_seconds} s")
            owed = amount_owed(
                price_fen=meter.price_fen, quantity=meter.quantity, unit_seconds=meter.unit_seconds, seconds=seconds
            )
            if meter.owed_fen != owed:
                audit.problems.append(f"{say}: meter {meter.pk} owes {meter.owed_fen} fen for {seconds} s, not {owed}")
            if in_ledger.get(meter.pk, 0) != meter.charged_fen:
                audit.problems.append(
                    f"{say}: meter {meter.pk} charged {meter.charged_fen} fen, the ledger holds "
                    f"{in_ledger.get(meter.pk, 0)}"
                )
    return audit
