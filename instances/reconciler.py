"""The reconciler: a periodic pass that compares every backend's truth with the database and repairs
the drift. Tasks make things fast; the reconciler makes them correct.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta

from django.db.models import Count, Q, Sum
from django.utils import timezone

from instances.capacity.preemption import instances_requeue, preemptions_finish_due
from instances.capacity.start_queue import instances_start_queued
from instances.entry_points import instances_entry_points_refresh
from instances.lifecycle import deadline_s, overdue_reason
from instances.models import Instance, InstanceEvent, Node, Region, StrayMachine
from instances.services import images_building_repair, images_saving_repair, instance_abandon, instance_sync, nodes_sync
from providers import Observed, PermanentBackendError, TransientBackendError, backend_aliases, get_backend

logger = logging.getLogger(__name__)

S = Instance.Status


def instances_reconcile() -> dict:
    """Periodic: compare every backend's truth with the database and repair the drift.

    - instances in a busy state, or whose machine disagrees with their status, are synced (which
      advances, re-drives or times them out);
    - machines of instances that are released or failed are destroyed (a crash leaked them);
    - machines no instance knows are recorded as ``StrayMachine`` for staff and logged, never touched;
    - instances busy past their deadline are settled with why (``instances_overdue``), reachable
      provider or not.

    An error on one instance or machine is logged and the others go on. The report adds ``overdue``
    (instances settled by their deadline) and ``regions``: per region slug, its backend, whether it
    answered, its nodes and cards now, the instances synced, the nodes whose health changed and the
    instances lost in this run.
    """
    report = {"synced": 0, "destroyed": 0, "stray": 0, "overdue": 0, "unreachable": [], "regions": {}}
    now = timezone.now()
    synced_by_region: dict[str, int] = {}
    for alias in backend_aliases():
        backend = get_backend(alias)
        try:
            nodes_sync(alias=alias)
            machines = {m.key: m for m in backend.machines()}
        except (TransientBackendError, PermanentBackendError):
            # One region's provider refusing (down, or missing a permission) must not stop the others.
            report["unreachable"].append(alias)
            logger.warning("backend %s unreachable; reconcile skipped", alias, exc_info=True)
            continue
        except Exception:
            # Nor may one region's backend breaking (a bug) stop the others, or the deadlines below.
            report["unreachable"].append(alias)
            logger.exception("backend %s raised; reconcile skipped", alias)
            continue
        live = Instance.objects.filter(backend_alias=alias).exclude(status__in=(S.RELEASED, S.FAILED, S.LOST))
        for instance_id, status, node_healthy, region_slug in live.values_list(
            "pk", "status", "node__is_healthy", "region__slug"
        ):
            machine = machines.get(str(instance_id))
            # DEGRADED (a crashed server) is never settled: the sync repairs it. Nor is a machine on a
            # node the provider reports unhealthy: its sync notices when the node took the machine down.
            settled = (
                node_healthy is not False
                and machine is not None
                and (
                    (status == S.RUNNING and machine.observed in (Observed.RUNNING, Observed.PENDING))
                    or (status in (S.STOPPED, S.PREEMPTED) and machine.observed == Observed.STOPPED)
                    # Requeued by the engine (Slurm), waiting in its queue: nothing to do until it runs.
                    or (status == S.PREEMPTED and machine.observed == Observed.PREEMPTED)
                )
            )
            if not settled:
                try:
                    instance_sync(instance_id=instance_id)
                except (TransientBackendError, PermanentBackendError):
                    logger.warning("sync of %s failed", instance_id, exc_info=True)
                except Exception:
                    # One instance that breaks its sync must not hold up the rest; its deadline still runs.
                    logger.exception("sync of %s raised", instance_id)
                report["synced"] += 1
                synced_by_region[region_slug] = synced_by_region.get(region_slug, 0) + 1
        known = {
            str(pk): status
            for pk, status in Instance.objects.filter(pk__in=_uuids(machines)).values_list("pk", "status")
        }
        stray_keys = []
        for key, machine in machines.items():
            status = known.get(key)
            if status in (S.RELEASED, S.FAILED, S.LOST):
                logger.warning("destroying leaked machine %s of a %s instance", key, status)
                try:
                    backend.destroy(key=key, state={})
                    report["destroyed"] += 1
                except (TransientBackendError, PermanentBackendError):
                    logger.warning("destroy of leaked %s failed", key, exc_info=True)
                except Exception:
                    logger.exception("destroy of leaked %s raised", key)
            elif status is None:
                stray_keys.append(key)
                detail = f"{machine.cards} GPU(s) on {machine.node or '?'}, {machine.observed}"
                stray, created = StrayMachine.objects.get_or_create(
                    backend_alias=alias, key=key, defaults={"detail": detail, "first_seen_at": now, "last_seen_at": now}
                )
                if not created:
                    StrayMachine.objects.filter(pk=stray.pk).update(last_seen_at=now, detail=detail, resolved_at=None)
                logger.warning("backend %s has a machine the console does not know: %s (%s)", alias, key, detail)
        report["stray"] += len(stray_keys)
        StrayMachine.objects.filter(backend_alias=alias, resolved_at__isnull=True).exclude(key__in=stray_keys).update(
            resolved_at=now
        )
        try:
            instances_entry_points_refresh(alias=alias, now=now)
        except Exception:
            logger.exception("refreshing the entry points of backend %s raised", alias)
    report["overdue"] = instances_overdue()
    # Preemptions whose finish task was lost, then the preempted instances that fit again, then the
    # stopped ones waiting in line for cards.
    report["preempted"] = preemptions_finish_due()
    report["requeued"] = instances_requeue()
    report["started_from_line"] = instances_start_queued()  # after the preempted: they had the cards first
    report.update(images_saving_repair(now=now))  # saves whose task vanished
    report.update(images_building_repair(now=now))  # builds whose worker vanished
    report["regions"] = _reconcile_regions_report(
        since=now, unreachable=set(report["unreachable"]), synced=synced_by_region
    )
    return report


def _reconcile_regions_report(*, since: datetime, unreachable: set[str], synced: dict[str, int]) -> dict:
    """Per region: what the reconciler saw and did in the run that started at ``since``."""
    configured = set(backend_aliases())
    nodes = {
        row["region_id"]: row
        for row in Node.objects.values("region_id").annotate(
            nodes=Count("id"),
            unhealthy=Count("id", filter=Q(is_healthy=False)),
            total=Sum("total_cards"),
            free=Sum("free_cards", filter=Q(is_healthy=True)),
            changed=Count("id", filter=Q(health_changed_at__gte=since)),
        )
    }
    lost = dict(
        InstanceEvent.objects.filter(created_at__gte=since, new=S.LOST, kind=InstanceEvent.Kind.STATUS)
        .values("instance__region_id")
        .annotate(n=Count("instance_id", distinct=True))
        .values_list("instance__region_id", "n")
    )
    regions = {}
    for region in Region.objects.order_by("slug"):
        row = nodes.get(region.pk, {})
        regions[region.slug] = {
            "backend": region.backend_alias,
            "configured": region.backend_alias in configured,
            "reachable": region.backend_alias in configured and region.backend_alias not in unreachable,
            "nodes": row.get("nodes", 0),
            "unhealthy_nodes": row.get("unhealthy", 0),
            "health_changes": row.get("changed", 0),
            "total_cards": row.get("total") or 0,
            "free_cards": row.get("free") or 0,
            "synced": synced.get(region.slug, 0),
            "lost": lost.get(region.pk, 0),
        }
    return regions


def _uuids(keys) -> list:
    out = []
    for key in keys:
        try:
            out.append(uuid.UUID(key))
        except ValueError:
            continue
    return out


def instances_overdue(*, now: datetime | None = None) -> int:
    """Periodic (the reconciler's last step): settle every instance busy past its deadline.

    Read from the database alone, so it holds when a provider does not answer, a sync raises or a
    region's backend is no longer configured: nothing stays busy for ever. Returns how many moved.
    """
    now = now or timezone.now()
    late = Q()
    for status in Instance.BUSY:
        late |= Q(status=status, status_changed_at__lte=now - timedelta(seconds=deadline_s(status)))
    settled = 0
    for instance in Instance.objects.filter(late).order_by("status_changed_at"):
        try:
            moved = instance_abandon(instance=instance, reason=overdue_reason(instance.status))
        except Exception:
            logger.exception("could not settle overdue instance %s", instance.pk)
            continue
        if moved:
            settled += 1
            logger.warning("instance %s was %s past its deadline: settled", instance.pk, instance.status)
    return settled
