"""Capacity taken back: which interruptible instances an on-demand launch preempts, and taking their cards.

When on-demand work cannot be placed on free cards, ``gpus_take_by_preempting`` finds the node where
the fewest running interruptible instances free enough (then the fewest cards wasted, then the
youngest victims: they lose the least work), and in one transaction moves them to PREEMPTING and
hands their cards to the new instance. The grace period, the checkpoint and the requeue are
``instances.capacity.preemption``'s, above the services.

Cards are never oversubscribed: the victims' rows are locked (in primary-key order, the order every
transition takes them: no deadlock between two launches choosing overlapping victims), each one's
move is a compare-and-set on RUNNING, and the node's count changes in one conditional update under
the ``free_cards`` check constraint. A launch that loses a race for a victim plans again.

Single-node interruptible instances are preempted first. Where they cannot free enough, a whole
interruptible cluster is a victim too, all or nothing: its cards on the node(s) taken go to the new
instance at once, while its other nodes keep its cards (the victim still holds them, ``node`` and
``extra_nodes`` narrowed to those) until it is off after its grace period, when they go back to
``free_cards`` as at any stop: the console never counts free a card the provider still holds.
"""

from __future__ import annotations

import functools
import itertools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from django.contrib.postgres.aggregates import ArrayAgg
from django.db import connection, transaction
from django.db.models import Count as models_count
from django.db.models import F, Q
from django.utils.translation import gettext_noop

from core.messages import reason as stored
from core.tasks import enqueue_on_commit
from instances.lifecycle import instance_transition
from instances.models import GpuModel, Instance, Node, Region

S = Instance.Status
_ATTEMPTS = 3


@dataclass(frozen=True)
class PreemptionPlan:
    """The node an on-demand request goes to and the interruptible instances that make room there."""

    node_id: int
    node_name: str
    victims: tuple[uuid.UUID, ...]
    freed_cards: int


@functools.lru_cache(maxsize=4096)
def smallest_set(sizes: tuple[int, ...], deficit: int) -> tuple[int, ...] | None:
    """Indexes into ``sizes`` (cards each victim holds) of the fewest victims that free ``deficit``
    cards, wasting the fewest cards among those; None when all of them together are not enough.

    Pure and cached by its arguments: a node holds at most eight instances, and a fleet full of spot
    work repeats the same few shapes, so the decision over 1,024 nodes costs a dictionary look-up each.
    """
    if deficit <= 0:
        return ()
    if sum(sizes) < deficit:
        return None
    # The k largest free the most any k can: the first k whose largest reach the deficit is the fewest.
    ordered = sorted(sizes, reverse=True)
    k = next(n for n in range(1, len(sizes) + 1) if sum(ordered[:n]) >= deficit)
    best = min(
        (c for c in itertools.combinations(range(len(sizes)), k) if sum(sizes[i] for i in c) >= deficit),
        key=lambda c: sum(sizes[i] for i in c),
    )
    return best


def _spot_clusters_on(*, region: Region, gpu_model: GpuModel, names: dict[str, int]) -> dict[int, list[tuple]]:
    """Per node (id, among ``names``: name -> id), the running interruptible clusters holding cards there,
    as ``(pk, cards)``, youngest first: the victims of last resort (a whole cluster's work is lost)."""
    held: dict[int, list[tuple]] = {}
    rows = (
        Instance.objects.filter(
            region=region,
            gpu_model=gpu_model,
            tier=Instance.Tier.INTERRUPTIBLE,
            status=S.RUNNING,
            no_gpu=False,  # a run without GPU holds no cards to take back
            node_count__gt=1,
            node__isnull=False,
        )
        .order_by("-running_since", "pk")
        .values_list("pk", "gpu_count", "node_id", "extra_nodes")
    )
    ids = set(names.values())
    for pk, size, head, extra in rows:
        for node_id in {head, *(names.get(name) for name in extra or ())}:
            if node_id in ids:
                held.setdefault(node_id, []).append((pk, size))
    return held


def cluster_preemption_plan(*, region: Region, gpu_model: GpuModel, count: int) -> PreemptionPlan | None:
    """``preemption_plan`` when single machines cannot free enough: on each healthy node the single
    machines and the interruptible clusters holding cards there are candidates (single ones first
    among equals), scored the same way (fewest victims, fewest cards wasted)."""
    healthy = {
        pk: (free, name)
        for pk, free, name in Node.objects.filter(
            region=region, backend_alias=region.backend_alias, gpu_model=gpu_model, is_healthy=True
        ).values_list("pk", "free_cards", "name")
    }
    clusters = _spot_clusters_on(
        region=region, gpu_model=gpu_model, names={name: pk for pk, (_free, name) in healthy.items()}
    )
    if not clusters:
        return None
    singles: dict[int, list[tuple]] = {}
    for pk, size, node_id in (
        Instance.objects.filter(
            region=region,
            gpu_model=gpu_model,
            tier=Instance.Tier.INTERRUPTIBLE,
            status=S.RUNNING,
            no_gpu=False,  # a run without GPU holds no cards to take back
            node_count=1,
            node_id__in=list(clusters),
        )
        .order_by("-running_since", "pk")
        .values_list("pk", "gpu_count", "node_id")
    ):
        singles.setdefault(node_id, []).append((pk, size))
    best: tuple[tuple[int, int, int], PreemptionPlan] | None = None
    for node_id, held in clusters.items():
        free, name = healthy[node_id]
        rows = singles.get(node_id, []) + held
        chosen = smallest_set(tuple(size for _pk, size in rows), count - free)
        if not chosen:
            continue
        freed = sum(rows[i][1] for i in chosen)
        plan = PreemptionPlan(
            node_id=node_id, node_name=name, victims=tuple(rows[i][0] for i in chosen), freed_cards=freed
        )
        score = (len(chosen), freed - (count - free), free)
        if best is None or score < best[0]:
            best = (score, plan)
    return None if best is None else best[1]


def preemption_plan(*, region: Region, gpu_model: GpuModel, count: int) -> PreemptionPlan | None:
    """The cheapest way to free ``count`` cards on one healthy node by preempting interruptible instances.

    Three reads: per node, the sizes of the interruptible instances running there (aggregated in the
    database, one row per node), the healthy nodes' free cards; then the chosen node's victims,
    youngest first among equal sizes.
    """
    preemptible = Instance.objects.filter(
        region=region,
        gpu_model=gpu_model,
        tier=Instance.Tier.INTERRUPTIBLE,
        status=S.RUNNING,
        no_gpu=False,  # a run without GPU holds no cards to take back
        node_count=1,
        node__isnull=False,
    )
    # Grouped by the node id alone (a hash aggregate, no sort); the nodes' own columns come from a
    # second, small read rather than widening the grouping.
    per_node = preemptible.order_by().values_list("node_id").annotate(sizes=ArrayAgg("gpu_count"))
    healthy = {
        pk: (free, name)
        for pk, free, name in Node.objects.filter(
            region=region, backend_alias=region.backend_alias, gpu_model=gpu_model, is_healthy=True
        ).values_list("pk", "free_cards", "name")
    }
    best: tuple[tuple[int, int, int], int, str] | None = None
    for node_id, sizes in per_node:
        if node_id not in healthy:
            continue
        free, name = healthy[node_id]
        deficit = count - free
        ordered = tuple(sorted(sizes, reverse=True))
        chosen = smallest_set(ordered, deficit)
        if chosen is None or not chosen:
            continue
        freed = sum(ordered[i] for i in chosen)
        score = (len(chosen), freed - deficit, free)
        if best is None or score < best[0]:
            best = (score, node_id, name)
            if score[:2] == (1, 0):
                break  # one victim, no card wasted: nothing beats it
    if best is None:
        return None
    (_victims, _waste, free), node_id, node_name = best
    deficit = count - free
    rows = list(preemptible.filter(node_id=node_id).order_by("-running_since", "pk").values_list("pk", "gpu_count"))
    chosen = smallest_set(tuple(size for _pk, size in rows), deficit)
    if chosen is None:  # it changed since the first read: the caller plans again
        return None
    victims = tuple(rows[i][0] for i in chosen)
    return PreemptionPlan(
        node_id=node_id, node_name=node_name, victims=victims, freed_cards=sum(rows[i][1] for i in chosen)
    )


def gpus_take_by_preempting(
    *, region: Region, gpu_model: GpuModel, count: int, for_instance_id: uuid.UUID, no_capacity: Exception
) -> Node:
    """Take ``count`` cards for on-demand instance ``for_instance_id`` by preempting interruptible ones;
    raises ``no_capacity`` when no set of them frees enough. Call inside the launch's transaction.

    The victims move to PREEMPTING (GPU meters closed now) with ``preempted_for`` set; their cards
    go to the new instance without passing through ``free_cards``, so no other launch can take them.
    """
    if connection.vendor != "postgresql":
        raise no_capacity  # the plan aggregates with PostgreSQL's ARRAY_AGG; tests and production run it
    for planner in (preemption_plan, cluster_preemption_plan):  # whole clusters only when singles fall short
        for _attempt in range(_ATTEMPTS):
            plan = planner(region=region, gpu_model=gpu_model, count=count)
            if plan is None:
                break
            node = _take(plan=plan, count=count, for_instance_id=for_instance_id)
            if node is not None:
                node.region, node.gpu_model = region, gpu_model
                return node
    raise no_capacity


def _take(*, plan: PreemptionPlan, count: int, for_instance_id: uuid.UUID) -> Node | None:
    """Carry out ``plan`` all or nothing (a savepoint); None when a victim or the node moved meanwhile."""
    with transaction.atomic():
        locked = _victims_lock(victims=plan.victims, on={pk: {plan.node_name} for pk in plan.victims})
        if locked is None:
            return None
        freed = sum(size for size, _names, _alias in locked.values())
        taken = Node.objects.filter(pk=plan.node_id, is_healthy=True, free_cards__gte=count - freed).update(
            free_cards=F("free_cards") + freed - count
        )
        if not taken:
            return None
        moved = _victims_preempt(
            victims=sorted(locked),
            for_instance_id=for_instance_id,
            keeps=_kept(locked, taken={pk: {plan.node_name} for pk in locked}),
        )
        if moved != len(locked):  # cannot happen under the row locks; never hand out a card twice
            transaction.set_rollback(True)
            return None
    return Node(pk=plan.node_id, name=plan.node_name)


def _victims_lock(
    *, victims: Sequence[uuid.UUID], on: dict[uuid.UUID, set[str]]
) -> dict[uuid.UUID, tuple[int, list[str], str]] | None:
    """Lock ``victims`` (in primary-key order) and check each still runs interruptible, holding cards on
    every node named in ``on[pk]``; ``{pk: (cards per node, its node names head first, its backend)}``, or
    None when one moved meanwhile (the caller plans again)."""
    rows = list(
        Instance.objects.select_for_update(of=("self",))
        .filter(pk__in=list(victims), status=S.RUNNING, tier=Instance.Tier.INTERRUPTIBLE, no_gpu=False)
        .order_by("pk")
        .values_list("pk", "gpu_count", "node_id", "node__name", "extra_nodes", "backend_alias")
    )
    if len(rows) != len(set(victims)):
        return None
    locked = {}
    for pk, size, head_id, head, extra, alias in rows:
        names = [head, *(extra or ())] if head_id else []
        if not on[pk] <= set(names):
            return None
        locked[pk] = (size, names, alias)
    return locked


def _kept(
    locked: dict[uuid.UUID, tuple[int, list[str], str]], *, taken: dict[uuid.UUID, set[str]]
) -> dict[uuid.UUID, tuple[str, list[str]]]:
    """Per victim, its backend and the nodes whose cards it keeps until it is off: all but those handed
    over (``taken``). A single machine keeps none."""
    return {pk: (alias, [n for n in names if n not in taken[pk]]) for pk, (_size, names, alias) in locked.items()}


def beneficiary_drive(instance_id) -> None:
    """A machine it preempted is off: create (or start) on-demand instance ``instance_id`` now. Its
    task checks that no other machine it displaces is still in its grace period (by name: tasks sit above)."""
    status = Instance.objects.filter(pk=instance_id).values_list("status", flat=True).first()
    task = {S.PROVISIONING: "instance_provision_task", S.STARTING: "instance_start_task"}.get(status)
    if task:
        enqueue_on_commit(f"instances.tasks.{task}", str(instance_id))


def _victims_preempt(
    *,
    victims: Sequence[uuid.UUID],
    for_instance_id: uuid.UUID,
    keeps: dict[uuid.UUID, tuple[str, list[str]]] | None = None,
) -> int:
    """Move ``victims`` to PREEMPTING for ``for_instance_id``. ``keeps``: per victim (a cluster), its
    backend and the nodes whose cards it still holds until it is off; they go back when it is PREEMPTED."""
    why = stored(
        gettext_noop(
            "Preempted: its cards were needed for on-demand work. It restarts by itself when capacity returns."
        )
    )
    keeps = keeps or {}
    wanted = Q()
    for alias, names in keeps.values():
        if names:
            wanted |= Q(backend_alias=alias, name=names[0])
    heads = (
        {(n.backend_alias, n.name): n for n in Node.objects.filter(wanted).only("pk", "name", "backend_alias")}
        if wanted
        else {}
    )
    moved = 0
    for pk in victims:
        alias, kept = keeps.get(pk) or ("", [])
        head = heads.get((alias, kept[0])) if kept else None

        # node=None: its cards now belong to the on-demand instance (see the module's docstring); a
        # cluster keeps its other nodes' cards until its machine is off.
        if instance_transition(
            instance_id=pk,
            src=S.RUNNING,
            dst=S.PREEMPTING,
            reason=why,
            node=head,
            extra_nodes=kept[1:] if head is not None else [],
            preempted_for_id=for_instance_id,
        ):
            moved += 1
            # The warning and the checkpoint now; the machine goes off after the grace period.
            enqueue_on_commit("instances.tasks.instance_preempt_task", str(pk))
    return moved


# --- Gangs: a cluster's nodes in as few network blocks as they fit in ----------------------------------------


class _Short(Exception):
    """Fewer nodes were taken than the gang needs: the savepoint gives back what was taken."""


def blocks_choose(fitting: dict[str, int], nodes: int) -> list[str] | None:
    """The blocks a gang of ``nodes`` goes to, given how many nodes fit in each block; None: too few.

    One block when one can hold it: the smallest that can (best fit keeps large blocks whole for large
    gangs). Otherwise the fullest blocks first, so the gang spans the fewest blocks possible.
    """
    if sum(fitting.values()) < nodes:
        return None
    whole = [block for block, n in fitting.items() if n >= nodes]
    if whole:
        return [min(whole, key=lambda block: (fitting[block], block))]
    chosen, total = [], 0
    for block in sorted(fitting, key=lambda block: (-fitting[block], block)):
        chosen.append(block)
        total += fitting[block]
        if total >= nodes:
            return chosen
    return None


def blocks_choose_near(fitting: dict[str, int], nodes: int, prefer: Sequence[str]) -> list[str] | None:
    """``blocks_choose`` for nodes joining a running cluster: the blocks it already spans (``prefer``,
    the one holding most of its nodes first) before any other, so a grown cluster spans the fewest
    blocks it can; what they cannot hold goes where ``blocks_choose`` would put a gang of that size."""
    if sum(fitting.values()) < nodes:
        return None
    chosen, total = [], 0
    for block in dict.fromkeys(prefer):
        if fitting.get(block, 0) > 0:
            chosen.append(block)
            total += fitting[block]
            if total >= nodes:
                return chosen
    more = blocks_choose({b: n for b, n in fitting.items() if b not in chosen}, nodes - total)
    return None if more is None else chosen + more


def gang_reserve(
    *,
    region: Region,
    gpu_model: GpuModel,
    count: int,
    nodes: int,
    exclude: Sequence[str] = (),
    prefer_blocks: Sequence[str] = (),
) -> list[tuple[int, str]] | None:
    """Take ``count`` cards on each of ``nodes`` distinct healthy nodes, all or none, in the fewest
    network blocks: ``(pk, name)`` per node, head first (blocks in the chosen order, then by name);
    None when the fleet cannot give every node now. Call inside a transaction.

    For a cluster that grows (``instances.capacity.resize``): ``exclude`` are the nodes it already holds (a
    node joins once), ``prefer_blocks`` the blocks it spans, filled first (``blocks_choose_near``).

    Two statements whatever the size: how many nodes fit per block, then one ``WITH picked AS
    MATERIALIZED (SELECT … LIMIT nodes FOR UPDATE SKIP LOCKED) UPDATE … RETURNING``. Nodes another launch holds locked are
    skipped; when that leaves the gang short, the savepoint gives its nodes back and it plans again,
    the last time waiting for those locks instead of skipping them.
    """
    eligible = Node.objects.filter(
        region=region, backend_alias=region.backend_alias, gpu_model=gpu_model, is_healthy=True, free_cards__gte=count
    ).exclude(name__in=list(exclude))
    table = connection.ops.quote_name(Node._meta.db_table)
    for attempt in range(_ATTEMPTS):
        fitting = dict(eligible.order_by().values_list("block").annotate(n=models_count("id")))
        blocks = blocks_choose_near(fitting, nodes, prefer_blocks) if prefer_blocks else blocks_choose(fitting, nodes)
        if blocks is None:
            return None
        wait = attempt == _ATTEMPTS - 1
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                # The nodes are picked once, in a materialised CTE. ``UPDATE … WHERE id IN (SELECT … LIMIT n
                # FOR UPDATE)`` let the planner rescan the subquery per row it updated (a nested-loop semi
                # join, chosen or not by the table's statistics): a rescan skips the rows this statement has
                # just updated, so LIMIT reached further and a cluster of 2 took cards on 3 nodes.
                cursor.execute(
                    f"WITH picked AS MATERIALIZED (SELECT id FROM {table}"  # noqa: S608
                    " WHERE region_id = %s AND backend_alias = %s AND gpu_model_id = %s"
                    " AND is_healthy AND free_cards >= %s AND block = ANY(%s::text[]) AND NOT (name = ANY(%s::text[]))"
                    " ORDER BY array_position(%s::text[], block::text), free_cards, name LIMIT %s"
                    f" FOR UPDATE{'' if wait else ' SKIP LOCKED'})"
                    f" UPDATE {table} AS n SET free_cards = n.free_cards - %s FROM picked"
                    " WHERE n.id = picked.id AND n.free_cards >= %s RETURNING n.id, n.name, n.block, n.free_cards",
                    [
                        region.pk,
                        region.backend_alias,
                        gpu_model.pk,
                        count,
                        blocks,
                        list(exclude),
                        blocks,
                        nodes,
                        count,
                        count,
                    ],
                )
                taken = cursor.fetchall()
                if len(taken) < nodes:
                    raise _Short
        except _Short:
            continue
        order = {block: i for i, block in enumerate(blocks)}
        taken.sort(key=lambda row: (order[row[2]], row[3], row[1]))  # blocks in order, then best fit
        return [(pk, name) for pk, name, _block, _free in taken]
    return None


# --- Gangs that preempt: an on-demand cluster taking cards back on several nodes ------------------------------


def gang_preemption_plan(
    *, region: Region, gpu_model: GpuModel, count: int, nodes: int, clusters: bool = False
) -> list[PreemptionPlan] | None:
    """``nodes`` distinct healthy nodes that can each give ``count`` cards, nodes with free cards first,
    then those whose smallest set of interruptible victims is smallest (fewest victims, then fewest
    cards wasted); None when even preempting every interruptible instance leaves too few.

    ``clusters``: whole interruptible clusters are candidates too (after the single machines of each
    node, so those go first among equals); a cluster chosen on several nodes is one victim."""
    healthy = {
        pk: (free, name)
        for pk, free, name in Node.objects.filter(
            region=region, backend_alias=region.backend_alias, gpu_model=gpu_model, is_healthy=True
        ).values_list("pk", "free_cards", "name")
    }
    youngest_first = ("-running_since", "pk")
    victims_by_node = {
        node_id: (sizes, pks)
        for node_id, sizes, pks in Instance.objects.filter(
            region=region,
            gpu_model=gpu_model,
            tier=Instance.Tier.INTERRUPTIBLE,
            status=S.RUNNING,
            no_gpu=False,  # a run without GPU holds no cards to take back
            node_count=1,
            node_id__in=list(healthy),
        )
        .order_by()
        .values_list("node_id")
        .annotate(sizes=ArrayAgg("gpu_count", order_by=youngest_first), pks=ArrayAgg("pk", order_by=youngest_first))
    }
    if clusters:
        held = _spot_clusters_on(
            region=region, gpu_model=gpu_model, names={name: pk for pk, (_free, name) in healthy.items()}
        )
        for node_id, rows in held.items():
            sizes, pks = victims_by_node.get(node_id, ((), ()))
            victims_by_node[node_id] = ([*sizes, *(n for _pk, n in rows)], [*pks, *(pk for pk, _n in rows)])
    scored = []
    for node_id, (free, name) in healthy.items():
        deficit = count - free
        sizes, pks = victims_by_node.get(node_id, ((), ()))
        chosen = smallest_set(tuple(sizes), deficit)
        if chosen is None:
            continue
        freed = sum(sizes[i] for i in chosen)
        plan = PreemptionPlan(node_id=node_id, node_name=name, victims=tuple(pks[i] for i in chosen), freed_cards=freed)
        scored.append(((len(chosen), max(0, freed - deficit), name), plan))
    if len(scored) < nodes:
        return None
    scored.sort(key=lambda item: item[0])
    return [plan for _score, plan in scored[:nodes]]


def gang_take_by_preempting(
    *,
    region: Region,
    gpu_model: GpuModel,
    count: int,
    nodes: int,
    for_instance_id: uuid.UUID,
    no_capacity: Exception,
) -> list[Node]:
    """``gpus_take_by_preempting`` for a cluster: ``count`` cards on each of ``nodes`` nodes, all or
    nothing, preempting the fewest interruptible instances; the nodes head first. Raises ``no_capacity``."""
    if connection.vendor != "postgresql":
        raise no_capacity
    for clusters in (False, True):  # whole clusters only when single machines fall short
        for _attempt in range(_ATTEMPTS):
            plans = gang_preemption_plan(
                region=region, gpu_model=gpu_model, count=count, nodes=nodes, clusters=clusters
            )
            if plans is None:
                break
            try:
                with transaction.atomic():
                    on: dict[uuid.UUID, set[str]] = {}
                    for plan in plans:
                        for pk in plan.victims:
                            on.setdefault(pk, set()).add(plan.node_name)
                    locked = _victims_lock(victims=sorted(on), on=on)
                    if locked is None:
                        raise _Short
                    # A victim chosen on several nodes frees its cards on each of them, once.
                    freed = {plan.node_id: sum(locked[pk][0] for pk in plan.victims) for plan in plans}
                    for node_id in sorted(freed):  # nodes in id order: two gangs lock them the same way
                        if not Node.objects.filter(
                            pk=node_id, is_healthy=True, free_cards__gte=count - freed[node_id]
                        ).update(free_cards=F("free_cards") + freed[node_id] - count):
                            raise _Short
                    wanted = sorted(locked)
                    if _victims_preempt(
                        victims=wanted, for_instance_id=for_instance_id, keeps=_kept(locked, taken=on)
                    ) != len(wanted):
                        raise _Short
            except _Short:
                continue
            return [Node(pk=plan.node_id, name=plan.node_name, region=region, gpu_model=gpu_model) for plan in plans]
    raise no_capacity
