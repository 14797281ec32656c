"""Elastic clusters: a running multi-node instance grows or shrinks by whole nodes.

``instance_resize`` does it in one transaction, with the instance's row locked so two resizes (or a
resize and a stop) cannot interleave:

- growing: quota, the launcher's limits and the balance are checked as at a launch, for the cards
  that join; the new nodes are taken all or nothing (``instances.capacity.takeback.gang_reserve``), in the
  blocks the cluster already spans first, then the fewest others;
- the provider is asked (``cluster_resize``, the optional ``ClusterResizeCapability``): the head
  (rank 0, every rank's ``MASTER_ADDR``) stays, nodes join after the last rank and leave from it;
- shrinking, the nodes that left give their cards back;
- billing follows to the second: the GPU meter closes at the old card count and opens at the new one
  at the same instant, in this transaction (the ledger settles the closed one exactly);
- the timeline says what changed (a ``NODE`` event: the status does not change, and it is never
  counted as a crash).

The provider's call is made inside the transaction: a refusal (or a provider that cannot be reached)
rolls back everything, the cards taken included, and the owner is told why. It is one short call (a
scale), unlike a boot, so the request waits for it rather than handing it to a worker: the owner
learns at once whether the cluster grew. Providers without the capability are refused before
anything is taken (``resize_not_supported``).
"""

from __future__ import annotations

import dataclasses

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Least
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop, ngettext

from billing.services import meter_open, meter_stop
from core.messages import reason as stored
from instances.capacity.takeback import gang_reserve
from instances.errors import (
    BackendUnavailable,
    LaunchInvalid,
    NoCapacity,
    OperationNotAllowed,
    ResizeNotSupported,
    ResizeRefused,
)
from instances.lifecycle import instance_events_write, instance_notify
from instances.members import member_limits_check
from instances.models import Instance, InstanceEvent, Node
from instances.quota import quota_check
from instances.services.common import _funds_check, _spec, instance_hourly_price, node_count_choices
from instances.services.fleet import _nodes_ensure
from instances.skus import gpu_meter_ref, gpu_sku_upsert, instance_shape
from providers import PermanentBackendError, TransientBackendError, get_backend
from teams.models import TeamEvent
from teams.services import team_event_record

S = Instance.Status


def resize_choices(*, instance: Instance) -> tuple[int, ...]:
    """The sizes ``instance`` may be resized to now (the page's choices): the cluster sizes offered, two
    nodes at least, at most what its provider spans; empty where it cannot be resized at all."""
    backend = get_backend(instance.backend_alias)
    if not backend.supports_cluster_resize or instance.node_count < 2 or instance.status != S.RUNNING:
        return ()
    return tuple(n for n in node_count_choices() if 2 <= n <= backend.max_nodes and n != instance.node_count)


def instance_resize(*, instance: Instance, node_count: int, actor=None) -> Instance:
    """Grow or shrink running cluster ``instance`` to ``node_count`` nodes (see the module's docstring).

    Resizing to the size it has changes nothing (a repeated request). ``actor`` is the person asking,
    for the timeline (None: the console itself).
    """
    backend = get_backend(instance.backend_alias)
    if not backend.supports_cluster_resize:
        raise ResizeNotSupported(
            _("Clusters in %(region)s cannot be resized while they run. Stop it and launch one of the new size.")
            % {"region": instance.region.name}
        )
    if instance.node_count < 2:
        raise ResizeNotSupported(_("Only a multi-node cluster can be resized by whole nodes."))
    if node_count == instance.node_count:
        return instance
    if instance.status != S.RUNNING:
        raise OperationNotAllowed(
            _("An instance that is %(status)s cannot be resized.") % {"status": instance.get_status_display()}
        )
    allowed = tuple(n for n in node_count_choices() if 2 <= n <= backend.max_nodes)
    if node_count not in allowed:
        raise LaunchInvalid(
            _("Choose %(choices)s nodes.") % {"choices": ", ".join(str(n) for n in allowed)}, field="node_count"
        )
    _nodes_ensure(region=instance.region)
    try:
        with transaction.atomic():
            _resize(instance=instance, node_count=node_count, actor=actor)
    except PermanentBackendError as exc:
        raise ResizeRefused(_("The provider refused the resize: %(why)s") % {"why": str(exc)}) from exc
    except TransientBackendError as exc:
        raise BackendUnavailable(
            _("The provider did not answer; nothing changed. Try again shortly. (%(why)s)") % {"why": str(exc)}
        ) from exc
    instance.refresh_from_db()
    return instance


def _resize(*, instance: Instance, node_count: int, actor) -> None:
    """The transaction of ``instance_resize``: it raises to roll everything back."""
    locked = (
        Instance.objects.select_for_update(of=("self",))
        .select_related("gpu_model", "image", "region", "node", "owner")
        .filter(pk=instance.pk, status=S.RUNNING, node_count=instance.node_count)
        .first()
    )
    if locked is None:
        now = Instance.objects.filter(pk=instance.pk).values_list("status", "node_count").first()
        if now == (S.RUNNING, node_count):
            return  # the same resize, asked twice at once: the other request did it
        raise OperationNotAllowed(_("The instance changed meanwhile; reload the page and try again."))
    old, per_node = locked.node_count, locked.gpu_count
    peers = list(locked.extra_nodes or [])
    hourly = instance_hourly_price(
        gpu_model=locked.gpu_model, gpu_count=per_node, node_count=node_count, tier=locked.tier
    )
    joined: list[str] = []
    left: list[str] = []
    if node_count > old:
        added = (node_count - old) * per_node
        quota_check(user=locked.owner, gpu_model=locked.gpu_model, count=added)
        member_limits_check(account=locked.owner, member_id=locked.created_by_id, count=added, launching=False)
        _funds_check(user=locked.owner, hourly_fen=hourly - locked.hourly_price_fen, instance=locked)
        joined = _nodes_take(instance=locked, nodes=node_count - old)
        peers = peers + joined
    else:
        peers, left = peers[: node_count - 1], peers[node_count - 1 :]
    spec = dataclasses.replace(_spec(locked), nodes=node_count, peer_nodes=tuple(peers))
    state = get_backend(locked.backend_alias).cluster_resize(key=locked.key, state=locked.backend_state, spec=spec)
    if left:  # their cards go back now, capped at the node's size as at any stop
        Node.objects.filter(backend_alias=locked.backend_alias, name__in=left).update(
            free_cards=Least(F("free_cards") + per_node, F("total_cards"))
        )
    now = timezone.now()
    Instance.objects.filter(pk=locked.pk).update(
        node_count=node_count, extra_nodes=peers, hourly_price_fen=hourly, backend_state=state
    )
    locked.node_count, locked.extra_nodes, locked.hourly_price_fen = node_count, peers, hourly
    # Billing to the second: the old card count up to now, the new one from now, one instant for both.
    meter_stop(ref=gpu_meter_ref(locked.pk), at=now)
    meter_open(
        user=locked.owner,
        sku=gpu_sku_upsert(gpu_model=locked.gpu_model, tier=locked.tier),
        quantity=locked.total_gpus,
        ref=gpu_meter_ref(locked.pk),
        description=f"{locked.name}: {instance_shape(locked)}",
        at=now,
    )
    who = {"who": actor.email} if actor is not None else {}
    if joined:
        why = stored(
            gettext_noop("Grew from %(old)d to %(new)d nodes: %(nodes)s joined; rank 0 stays on %(head)s"),
            old=old,
            new=node_count,
            nodes=", ".join(joined),
            head=locked.node.name,
        )
    else:
        why = stored(
            gettext_noop("Shrank from %(old)d to %(new)d nodes: %(nodes)s left; rank 0 stays on %(head)s"),
            old=old,
            new=node_count,
            nodes=", ".join(left),
            head=locked.node.name,
        )
    moves = [(locked.pk, S.RUNNING, S.RUNNING, why)]
    if who:
        moves.insert(0, (locked.pk, S.RUNNING, S.RUNNING, stored(gettext_noop("Resize asked by %(who)s"), **who)))
    instance_events_write(moves=moves, at=now, kind=InstanceEvent.Kind.NODE)
    if actor is not None and actor.pk != locked.owner_id:  # a team's: its audit log says who changed the spend
        team_event_record(
            account=locked.owner_id,
            actor=actor,
            action=TeamEvent.Action.INSTANCE_RESIZED,
            target=locked.name,
            details={"instance": str(locked.pk), "nodes_from": old, "nodes_to": node_count},
        )
    transaction.on_commit(lambda: instance_notify(locked))


def _nodes_take(*, instance: Instance, nodes: int) -> list[str]:
    """Take ``gpu_count`` cards on each of ``nodes`` more nodes for ``instance``, all or none, in the blocks
    it spans first; raises ``NoCapacity`` saying how many could join. Free cards only: a resize never
    preempts anyone (the cluster already runs; it can wait for room)."""
    held = instance.node_names
    blocks = dict(Node.objects.filter(backend_alias=instance.backend_alias, name__in=held).values_list("name", "block"))
    by_count: dict[str, int] = {}
    for name in held:
        by_count[blocks.get(name, "")] = by_count.get(blocks.get(name, ""), 0) + 1
    prefer = sorted(by_count, key=lambda block: (-by_count[block], block))
    taken = gang_reserve(
        region=instance.region,
        gpu_model=instance.gpu_model,
        count=instance.gpu_count,
        nodes=nodes,
        exclude=held,
        prefer_blocks=prefer,
    )
    if taken is not None:
        return [name for _pk, name in taken]
    fit = (
        Node.objects.filter(
            region=instance.region,
            backend_alias=instance.backend_alias,
            gpu_model=instance.gpu_model,
            is_healthy=True,
            free_cards__gte=instance.gpu_count,
        )
        .exclude(name__in=held)
        .count()
    )
    raise NoCapacity(
        ngettext(
            "Growing by %(nodes)d nodes needs %(count)d free %(gpu)s cards on each, and only %(fit)d other node "
            "in %(region)s has that many right now. Try a smaller size.",
            "Growing by %(nodes)d nodes needs %(count)d free %(gpu)s cards on each, and only %(fit)d other nodes "
            "in %(region)s have that many right now. Try a smaller size.",
            fit,
        )
        % {
            "nodes": nodes,
            "count": instance.gpu_count,
            "gpu": instance.gpu_model.name,
            "fit": fit,
            "region": instance.region.name,
        },
        field="node_count",
    )
