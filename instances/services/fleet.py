"""The fleet: the console's nodes kept in line with what each provider reports (``nodes_sync``), their
health, and the one sync a launch needs before it can place (``_nodes_ensure``).
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from core.memo import process_memo_register
from core.messages import reason as stored
from core.messages import shown
from instances.errors import BackendUnavailable
from instances.lifecycle import instance_events_write, instance_notify
from instances.models import GpuModel, Instance, InstanceEvent, Node, Region
from instances.services.common import S
from instances.services.sync import instance_sync
from providers import PermanentBackendError, TransientBackendError, backend_aliases, get_backend

logger = logging.getLogger(__name__)


def nodes_sync(*, alias: str) -> int:
    """Bring the console's nodes in line with what backend ``alias`` reports; returns how many it has.

    New nodes arrive with all cards free; a node whose card count changed keeps its allocations; a
    node that is unhealthy or no longer reported takes no new placements. A node is placed in the
    region of the slug it reports only when that region is served by ``alias``: a backend cannot put
    nodes into another backend's region (placement there would ask the wrong provider).

    A change of health is recorded once (compare-and-set on the node), with a ``NODE`` event on the
    timeline of every instance holding cards on it; whether those instances are lost is the
    provider's word, read by the reconciler's sync (a drained node's machines run on).
    """
    infos = get_backend(alias).nodes()
    regions = {r.slug: r for r in Region.objects.all()}
    gpus = {g.slug: g for g in GpuModel.objects.all()}
    existing = {n.name: n for n in Node.objects.filter(backend_alias=alias)}
    now = timezone.now()
    seen = []
    for info in infos:
        region, gpu = regions.get(info.region), gpus.get(info.gpu_model)
        if region is None or gpu is None:
            logger.warning("node %s: unknown region %r or GPU model %r", info.name, info.region, info.gpu_model)
            continue
        if region.backend_alias != alias:
            logger.warning(
                "node %s of backend %s is in region %s, which backend %s serves: ignored",
                info.name,
                alias,
                region.slug,
                region.backend_alias,
            )
            continue
        seen.append(info.name)
        detail = "" if info.healthy else (info.detail or "unhealthy")[:128]
        node = existing.get(info.name)
        if node is None:
            Node.objects.get_or_create(
                backend_alias=alias,
                name=info.name,
                defaults={
                    "region": region,
                    "gpu_model": gpu,
                    "total_cards": info.cards,
                    "free_cards": info.cards,
                    "is_healthy": info.healthy,
                    "provider_free_cards": info.free_cards,
                    "health_detail": detail,
                    "health_changed_at": None if info.healthy else now,
                    "block": info.block[:64],
                    "cached_images": sorted(info.images),
                },
            )
            continue
        if node.block != info.block[:64]:
            Node.objects.filter(pk=node.pk).update(block=info.block[:64])
        if node.total_cards != info.cards:
            with transaction.atomic():
                node = Node.objects.select_for_update().get(pk=node.pk)
                node.free_cards = max(0, min(info.cards, node.free_cards + info.cards - node.total_cards))
                node.total_cards = info.cards
                node.save(update_fields=["free_cards", "total_cards"])
        if node.is_healthy != info.healthy or node.health_detail != detail:
            _node_health_set(node=node, healthy=info.healthy, detail=detail, at=now)
        if info.free_cards is not None and node.provider_free_cards != info.free_cards:
            Node.objects.filter(pk=node.pk).update(provider_free_cards=info.free_cards)
        if sorted(info.images) != sorted(node.cached_images or ()):
            Node.objects.filter(pk=node.pk).update(cached_images=sorted(info.images))
    Node.objects.filter(backend_alias=alias, name__in=seen).update(last_seen_at=now)
    for node in Node.objects.filter(backend_alias=alias).exclude(name__in=seen).exclude(health_detail=_MISSING):
        _node_health_set(node=node, healthy=False, detail=_MISSING, at=now)
    return len(seen)


# The health detail of a node its backend no longer reports (kept in English: it is data, shown
# translated where it is displayed).
_MISSING = "not reported"


def _node_health_set(*, node: Node, healthy: bool, detail: str, at: datetime) -> bool:
    """Record a node's new health once: the compare-and-set on its old health makes a concurrent
    sync (two reconcilers, a staff "sync now") write the instances' events only once."""
    with transaction.atomic():
        moved = Node.objects.filter(pk=node.pk, is_healthy=node.is_healthy, health_detail=node.health_detail).update(
            is_healthy=healthy, health_detail=detail, health_changed_at=at
        )
        if not moved:
            return False
        was_healthy = node.is_healthy
        node.is_healthy, node.health_detail, node.health_changed_at = healthy, detail, at
        if healthy:
            if was_healthy:
                return True
            reason = stored(gettext_noop("Node %(node)s is back in service"), node=node.name)
        else:
            why = stored(gettext_noop("no longer reported by its provider")) if detail == _MISSING else detail
            reason = stored(
                gettext_noop("Node %(node)s is out of service (%(why)s): it takes no new instances"),
                node=node.name,
                why=why,
            )
        logger.warning("node %s of backend %s: %s", node.name, node.backend_alias, shown(reason))
        # A cluster's other nodes are matched here rather than by a JSON containment lookup, which
        # only PostgreSQL has.
        on_node = [
            instance
            for instance in Instance.objects.filter(
                Q(node_id=node.pk) | Q(backend_alias=node.backend_alias, node_count__gt=1)
            ).exclude(status__in=(S.RELEASED, S.FAILED, S.LOST))
            if instance.node_id == node.pk or node.name in (instance.extra_nodes or ())
        ]
        instance_events_write(
            moves=[(instance.pk, instance.status, instance.status, reason) for instance in on_node],
            at=at,
            kind=InstanceEvent.Kind.NODE,
        )
        for instance in on_node:
            transaction.on_commit(lambda instance=instance: instance_notify(instance))
    return True


def region_nodes_sync(*, region: Region) -> dict:
    """Staff's "sync now": read the nodes of ``region``'s backend at once instead of at the next
    reconcile, then sync the instances on its nodes that are out of service, so that machines the
    provider lost with a node are marked lost now. Returns ``{nodes, unhealthy, synced}`` for the region.

    The backend is synced whole: its other regions are refreshed too (one ``nodes()`` call serves all).
    """
    if region.backend_alias not in backend_aliases():
        raise BackendUnavailable(
            _("The backend %(alias)s of %(region)s is not configured (PROVISIONING_BACKENDS).")
            % {"alias": region.backend_alias, "region": region.name}
        )
    try:
        nodes_sync(alias=region.backend_alias)
    except TransientBackendError as exc:
        raise BackendUnavailable(
            _("The backend of %(region)s did not answer: %(error)s") % {"region": region.name, "error": exc}
        ) from exc
    synced = 0
    on_bad_nodes = Instance.objects.filter(region=region, node__is_healthy=False).exclude(
        status__in=(S.RELEASED, S.FAILED, S.LOST)
    )
    for instance_id in on_bad_nodes.values_list("pk", flat=True):
        try:
            instance_sync(instance_id=instance_id)
        except (TransientBackendError, PermanentBackendError):
            logger.warning("sync of %s failed", instance_id, exc_info=True)
        synced += 1
    nodes = Node.objects.filter(region=region)
    return {"nodes": nodes.count(), "unhealthy": nodes.filter(is_healthy=False).count(), "synced": synced}


def nodes_ensure() -> None:
    """Sync every backend's nodes once, when the console has none yet (a fresh install, a new backend)."""
    known = set(Node.objects.values_list("backend_alias", flat=True).distinct())
    for alias in backend_aliases():
        if alias not in known:
            try:
                nodes_sync(alias=alias)
            except TransientBackendError:
                logger.warning("backend %s unreachable; its capacity shows once it answers", alias)


# The backends this process has seen nodes of: a fleet, once read, is never empty again (nodes are
# marked gone, not deleted), so each launch need not ask the database again.
_nodes_known: set[str] = set()


process_memo_register(_nodes_known.clear)


def _nodes_ensure(*, region: Region) -> None:
    if region.backend_alias in _nodes_known:
        return
    if not Node.objects.filter(backend_alias=region.backend_alias).exists():
        nodes_sync(alias=region.backend_alias)
    _nodes_known.add(region.backend_alias)
