"""Placement: which node's cards a launch or a start takes. Best fit on one node, or distinct nodes for a
cluster, under a row lock; reserved capacity first for its holder, and preempting interruptible work
when an on-demand launch finds no free cards (``instances.capacity.takeback``).
"""

from __future__ import annotations

import uuid

from django.db import connection
from django.db.models import Case, F, When
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from instances.capacity.reservations import reservations_admit
from instances.capacity.takeback import gang_reserve, gang_take_by_preempting, gpus_take_by_preempting
from instances.errors import NoCapacity
from instances.members import member_limits_check
from instances.models import GpuModel, Instance, Node, Region
from instances.quota import quota_check
from instances.services.common import _funds_check


def _gpus_reserve(*, region: Region, gpu_model: GpuModel, count: int) -> Node:
    """Take ``count`` cards on one node: best fit (the fullest node that fits), never oversubscribing.

    Best fit keeps empty nodes empty for 8-card requests. The conditional update re-checks the free
    count under the row lock, so when two launches race for the last cards exactly one wins.
    """
    taken = _gpus_take_unlocked(region=region, gpu_model=gpu_model, count=count)
    if taken is not None:
        return Node(pk=taken[0], name=taken[1], region=region, gpu_model=gpu_model)
    for _attempt in range(5):
        candidates = list(
            Node.objects.filter(
                region=region,
                backend_alias=region.backend_alias,
                gpu_model=gpu_model,
                is_healthy=True,
                free_cards__gte=count,
            )
            .order_by("free_cards", "name")
            .values_list("pk", "name")[:16]
        )
        if not candidates:
            break
        for pk, name in candidates:
            taken = Node.objects.filter(pk=pk, is_healthy=True, free_cards__gte=count).update(
                free_cards=F("free_cards") - count
            )
            if taken:
                return Node(pk=pk, name=name, region=region, gpu_model=gpu_model)
    raise NoCapacity(
        _("No node in %(region)s has %(count)d free %(gpu)s cards right now. Try fewer cards or another region.")
        % {"region": region.name, "count": count, "gpu": gpu_model.name},
        field="gpu_count",
    )


def _gpus_take_unlocked(*, region: Region, gpu_model: GpuModel, count: int) -> tuple[int, str] | None:
    """``_gpus_reserve``'s usual case in one statement: take ``count`` cards on the best-fitting node that
    no other launch holds locked right now; ``(pk, name)``, or None when none (the caller then waits).

    The node another launch is taking cards on stays locked until that launch commits: waiting for it
    queued every launch of a model behind one row. FOR UPDATE re-checks the free count on the newest
    version of the row, and the update checks it again, so cards are never taken twice.
    """
    table = connection.ops.quote_name(Node._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET free_cards = free_cards - %s WHERE free_cards >= %s AND id = ("  # noqa: S608
            f"SELECT id FROM {table} WHERE region_id = %s AND backend_alias = %s AND gpu_model_id = %s"
            " AND is_healthy AND free_cards >= %s ORDER BY free_cards, name LIMIT 1 FOR UPDATE SKIP LOCKED"
            ") RETURNING id, name",
            [count, count, region.pk, region.backend_alias, gpu_model.pk, count],
        )
        return cursor.fetchone()


def _gpus_reserve_nodes(*, region: Region, gpu_model: GpuModel, count: int, nodes: int) -> list[Node]:
    """Take ``count`` cards on each of ``nodes`` distinct nodes (a cluster), all or none; the first is its head.

    In the fewest network blocks, in one statement (``instances.capacity.takeback.gang_reserve``): when the
    fleet cannot give every node, none is taken.
    """
    if nodes == 1:
        return [_gpus_reserve(region=region, gpu_model=gpu_model, count=count)]
    taken = gang_reserve(region=region, gpu_model=gpu_model, count=count, nodes=nodes)
    if taken is not None:
        return [Node(pk=pk, name=name, region=region, gpu_model=gpu_model) for pk, name in taken]
    eligible = Node.objects.filter(
        region=region, backend_alias=region.backend_alias, gpu_model=gpu_model, is_healthy=True
    )
    fitting = eligible.filter(free_cards__gte=count).count()
    raise NoCapacity(
        ngettext(
            "A cluster of %(nodes)d nodes needs %(count)d free %(gpu)s cards on each, and only %(fit)d node "
            "in %(region)s has that many right now. Try fewer nodes, fewer cards or another region.",
            "A cluster of %(nodes)d nodes needs %(count)d free %(gpu)s cards on each, and only %(fit)d nodes "
            "in %(region)s have that many right now. Try fewer nodes, fewer cards or another region.",
            fitting,
        )
        % {"nodes": nodes, "count": count, "gpu": gpu_model.name, "fit": fitting, "region": region.name},
        field="node_count",
    )


def _gpus_reserve_for(
    *, region: Region, gpu_model: GpuModel, count: int, tier: str, instance_id: uuid.UUID, owner_id: int
) -> tuple[Node, bool]:
    """``_gpus_reserve`` for an instance of ``tier``, and whether it preempted others to get the cards:
    on-demand work that finds no free cards preempts interruptible instances (``instances.capacity.takeback``);
    interruptible work only ever takes free cards. On-demand work leaves other accounts' reserved cards
    alone (``instances.capacity.reservations``: one EXISTS where none is in its window)."""
    if tier == Instance.Tier.ON_DEMAND:
        reservations_admit(region=region, gpu_model=gpu_model, owner_id=owner_id, count=count, instance_id=instance_id)
    try:
        return _gpus_reserve(region=region, gpu_model=gpu_model, count=count), False
    except NoCapacity as exc:
        if tier != Instance.Tier.ON_DEMAND:
            raise
        node = gpus_take_by_preempting(
            region=region, gpu_model=gpu_model, count=count, for_instance_id=instance_id, no_capacity=exc
        )
        return node, True


def _gpus_reserve_nodes_for(
    *,
    region: Region,
    gpu_model: GpuModel,
    count: int,
    nodes: int,
    tier: str,
    instance_id: uuid.UUID,
    owner_id: int,
) -> tuple[list[Node], bool]:
    """``_gpus_reserve_nodes`` for a cluster of ``tier``, and whether it preempted others (as
    ``_gpus_reserve_for``: on-demand work takes cards back from interruptible instances, and leaves
    other accounts' reserved cards alone)."""
    if tier == Instance.Tier.ON_DEMAND:
        reservations_admit(
            region=region, gpu_model=gpu_model, owner_id=owner_id, count=count * nodes, instance_id=instance_id
        )
    try:
        return _gpus_reserve_nodes(region=region, gpu_model=gpu_model, count=count, nodes=nodes), False
    except NoCapacity as exc:
        if tier != Instance.Tier.ON_DEMAND or nodes == 1:
            raise
        taken = gang_take_by_preempting(
            region=region, gpu_model=gpu_model, count=count, nodes=nodes, for_instance_id=instance_id, no_capacity=exc
        )
        return taken, True


def _node_without_cards(instance: Instance) -> Node:
    """A node of the instance's region for a run that takes no cards (no-GPU mode): a healthy one of its
    own GPU model where there is one (its image is likelier cached there), else any healthy one; the
    emptiest first. No cards are taken, so no lock is needed."""
    region = instance.region
    node = (
        Node.objects.filter(region=region, backend_alias=region.backend_alias, is_healthy=True)
        .order_by(Case(When(gpu_model_id=instance.gpu_model_id, then=0), default=1), "-free_cards", "name")
        .first()
    )
    if node is None:
        raise NoCapacity(
            _("No node in %(region)s can run it right now. Try again later.") % {"region": region.name},
            field="no_gpu",
        )
    return node


def _instance_place(instance: Instance) -> dict:
    """Reserve the cards a stopped instance needs to run again, within quota and balance; returns the
    instance's new ``node`` (and a cluster's ``extra_nodes``). Call it inside the transaction that moves it.

    In no-GPU mode (``instance.no_gpu``, a single machine) it takes no cards: no quota or member card
    limit applies, the balance is checked at the no-GPU price, and any node of its region will do."""
    gpu_model, region = instance.gpu_model, instance.region
    if instance.cards_held == 0:
        _funds_check(user=instance.owner, hourly_fen=instance.billed_hourly_fen, instance=instance)
        return {"node": _node_without_cards(instance), "displaced_others": False}
    quota_check(user=instance.owner, gpu_model=gpu_model, count=instance.total_gpus)
    # The cards count against its launcher's limits in a team, whoever starts it.
    member_limits_check(
        account=instance.owner, member_id=instance.created_by_id, count=instance.total_gpus, launching=False
    )
    _funds_check(user=instance.owner, hourly_fen=instance.hourly_price_fen, instance=instance)
    if instance.node_count == 1:
        node, displaced = _gpus_reserve_for(
            region=region,
            gpu_model=gpu_model,
            count=instance.gpu_count,
            tier=instance.tier,
            instance_id=instance.pk,
            owner_id=instance.owner_id,
        )
        return {"node": node, "displaced_others": displaced}
    (node, *others), displaced = _gpus_reserve_nodes_for(
        region=region,
        gpu_model=gpu_model,
        count=instance.gpu_count,
        nodes=instance.node_count,
        tier=instance.tier,
        instance_id=instance.pk,
        owner_id=instance.owner_id,
    )
    return {"node": node, "extra_nodes": [n.name for n in others], "displaced_others": displaced}
