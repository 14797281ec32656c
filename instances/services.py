"""The instances app's verbs: launch, start, stop, restart, release, rename, auto-stop and sync.
Views, the API and Celery tasks all call these; nothing else changes an instance.

Every status change goes through ``instances.lifecycle.instance_transition`` (compare-and-set + event +
billing + live push, in one transaction); every verb starts with its guard, so running it twice does
nothing more. The operations that need the provider (stop, start, restart, release) are one table,
``OPERATIONS``: the request-time verb (``instance_stop``) moves the instance to the operation's busy
status and enqueues its task on commit; the task's verb (``instance_operation_execute``) talks to the
backend and finishes the move. The reconciler (``instances.reconciler``) repairs whatever a lost task
or a crashed worker left behind; GPU quota is ``instances.quota``.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import F, Q
from django.db.models.functions import Greatest, Least
from django.utils import timezone
from django.utils.module_loading import import_string
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop, ngettext

from accounts.models import SSHKey
from billing.alerts import meters_stop_unpaid
from billing.services import InsufficientFunds, launch_check
from core import sql
from core.memo import process_memo_register
from core.messages import reason as stored
from core.messages import shown
from core.tasks import enqueue_on_commit
from instances.boot import boot_changes, boot_failed, node_image_cached
from instances.capacity import beneficiary_drive, gang_reserve, gang_take_by_preempting, gpus_take_by_preempting
from instances.entry_points import running_changes
from instances.errors import (
    BackendUnavailable,
    BudgetReached,
    FundsTooLow,
    LaunchInvalid,
    NoCapacity,
    OperationNotAllowed,
)
from instances.gpu_metrics import gpu_metrics_hooks
from instances.incidents import incident_credit
from instances.lifecycle import (
    ALLOWED,
    SETTLES_AT,
    deadline_s,
    instance_events_write,
    instance_gpus_free,
    instance_notify,
    instance_transition,
    overdue_reason,
)
from instances.members import member_limits_check
from instances.models import GpuModel, Image, Instance, InstanceEvent, Node, Region
from instances.quota import quota_check
from instances.reservations import reservations_admit
from instances.tenancy import tenant_for
from instances.volumes import volume_hooks
from notifications.models import Kind
from notifications.services import Message, notify
from providers import (
    AppLaunch,
    InstanceSpec,
    Observed,
    PermanentBackendError,
    ProvisioningBackend,
    TransientBackendError,
    backend_aliases,
    get_backend,
)
from teams.access import Access, membership_access
from teams.models import Membership, TeamEvent
from teams.services import team_event_record

logger = logging.getLogger(__name__)

S = Instance.Status


# --- Capacity and placement ------------------------------------------------------------------------------


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

    In the fewest network blocks, in one statement (``instances.capacity.gang_reserve``): when the
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
    on-demand work that finds no free cards preempts interruptible instances (``instances.capacity``);
    interruptible work only ever takes free cards. On-demand work leaves other accounts' reserved cards
    alone (``instances.reservations``: one EXISTS where none is in its window)."""
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


def _funds_check(*, user, hourly_fen: int, instance: Instance | None = None) -> None:
    """Before compute starts (a launch; a start, of ``instance``): the money must cover it, and no
    spending guard (a budget's hard cap, an instance's own limit: ``INSTANCES_SPEND_GUARD``, named by
    an app above) may refuse it."""
    try:
        launch_check(user=user, extra_hourly_fen=hourly_fen)
    except InsufficientFunds as exc:
        raise FundsTooLow(str(exc)) from exc
    guard = getattr(settings, "INSTANCES_SPEND_GUARD", "")
    refusal = import_string(guard)(user=user, instance=instance) if guard else None
    if refusal:
        raise BudgetReached(refusal)


# --- Launch ---------------------------------------------------------------------------------------------------


def instance_hourly_price(
    *, gpu_model: GpuModel, gpu_count: int, node_count: int = 1, tier: str = Instance.Tier.ON_DEMAND
) -> int:
    """What it costs per hour running: every card of every node, at the model's card-hour price for ``tier``."""
    return gpu_model.card_hour_price_fen(tier) * gpu_count * node_count


def node_count_choices() -> tuple[int, ...]:
    """The cluster sizes offered: the allowed counts up to ``INSTANCES_MAX_NODES``."""
    return tuple(n for n in Instance.NODE_COUNTS if n <= settings.INSTANCES_MAX_NODES)


def instance_launch(
    *,
    user,
    region: Region,
    gpu_model: GpuModel,
    gpu_count: int,
    image: Image,
    disk_gb: int,
    ssh_keys=(),
    name: str = "",
    app: AppLaunch | None = None,
    volumes=(),
    node_count: int = 1,
    ports=(),
    tier: str = Instance.Tier.ON_DEMAND,
    checkpoint_command: str = "",
    actor=None,
) -> Instance:
    """Validate, reserve cards on a node and record the instance; a worker creates the machine.

    ``user`` is the account that owns it and pays (a person's, or a team's); ``actor`` the person who
    launches it (``Instance.created_by``; ``user`` when not given). On a team's account the actor's own
    limits apply too (``instances.members``), the SSH keys are the actor's, and the team's audit log
    records the launch.

    ``ports`` are HTTP ports the owner will serve, declared in the same transaction by the ports app
    (``INSTANCES_PORTS_HOOK``), so their URLs are there when the machine runs.

    ``app`` is a server the machine runs beside its entry points (a one-click deployment's); a region
    whose provider cannot run it refuses here, before anything is reserved.

    Refused before anything is created when the choice is invalid, over quota, without capacity or
    without the balance to run it for the minimum runway. Nothing is billed until it is running.
    ``volumes`` are ``(volume, mount_path, mode)`` triples attached in the same transaction by the
    volumes app (``INSTANCES_VOLUME_HOOKS``; storage's rules), so the machine boots with them mounted.

    ``node_count`` > 1 makes a cluster: ``gpu_count`` cards on each of that many distinct nodes,
    priced, billed and counted against quota as ``node_count × gpu_count`` cards.

    ``tier``: on-demand (the default) preempts interruptible instances when no free cards are left;
    interruptible is cheaper and may be preempted, running ``checkpoint_command`` in the grace period.
    """
    if tier not in Instance.Tier.values:
        raise LaunchInvalid(_("Choose on-demand or interruptible."), field="tier")
    checkpoint_command = (checkpoint_command or "").strip()
    if len(checkpoint_command) > 500 or "\x00" in checkpoint_command:
        raise LaunchInvalid(_("The checkpoint command is at most 500 characters."), field="checkpoint_command")
    if gpu_count not in Instance.GPU_COUNTS:
        raise LaunchInvalid(_("Choose 1, 2, 4 or 8 GPUs."), field="gpu_count")
    allowed_nodes = node_count_choices()
    if node_count not in allowed_nodes:
        raise LaunchInvalid(
            _("Choose %(choices)s nodes.") % {"choices": ", ".join(str(n) for n in allowed_nodes)},
            field="node_count",
        )
    if not (settings.INSTANCES_DISK_MIN_GB <= disk_gb <= settings.INSTANCES_DISK_MAX_GB):
        raise LaunchInvalid(
            _("The disk must be between %(min)d and %(max)d GB.")
            % {"min": settings.INSTANCES_DISK_MIN_GB, "max": settings.INSTANCES_DISK_MAX_GB},
            field="disk_gb",
        )
    if region.backend_alias not in backend_aliases():
        raise LaunchInvalid(_("That region is not available."), field="region")
    for obj, field, label in (
        (region, "region", _("That region is not available.")),
        (gpu_model, "gpu_model", _("That GPU model is not available.")),
        (image, "image", _("That image is not available.")),
    ):
        if not obj.is_active:
            raise LaunchInvalid(label, field=field)
    if not get_backend(region.backend_alias).has_image(image.slug):
        # The owner's choice is never replaced by another image: a region without it refuses the launch.
        raise LaunchInvalid(
            _("The image %(image)s is not available in %(region)s.") % {"image": image.name, "region": region.name},
            field="image",
        )
    actor = actor if actor is not None else user
    ssh_keys = list(ssh_keys)
    if any(key.user_id != actor.pk for key in ssh_keys):
        raise LaunchInvalid(_("Choose SSH keys from your own account."), field="ssh_keys")
    ports = sorted(set(ports))
    if any(not isinstance(port, int) or not 1 <= port <= 65535 for port in ports):
        raise LaunchInvalid(_("A port is a number from 1 to 65535."), field="ports")
    if len(ports) > 16:
        raise LaunchInvalid(_("An instance serves at most %(n)d ports.") % {"n": 16}, field="ports")
    ports_hook = getattr(settings, "INSTANCES_PORTS_HOOK", "")
    if ports and not ports_hook:
        raise LaunchInvalid(_("This console serves no ports of your own."), field="ports")
    name = (name or "").strip() or f"{gpu_model.slug}-{timezone.now():%m%d-%H%M%S}"
    if len(name) > 64:
        raise LaunchInvalid(_("Names are at most 64 characters."), field="name")
    max_nodes = get_backend(region.backend_alias).max_nodes
    if node_count > max_nodes:
        raise LaunchInvalid(
            ngettext(
                "Instances in %(region)s run on %(max)d node at most; choose fewer nodes or another region.",
                "Instances in %(region)s run on %(max)d nodes at most; choose fewer nodes or another region.",
                max_nodes,
            )
            % {"region": region.name, "max": max_nodes},
            field="node_count",
        )
    if app is not None:
        why = get_backend(region.backend_alias).app_check(app)
        if why:
            raise LaunchInvalid(
                _("This app cannot run in %(region)s: %(why)s.") % {"region": region.name, "why": why}, field="region"
            )
    hourly = instance_hourly_price(gpu_model=gpu_model, gpu_count=gpu_count, node_count=node_count, tier=tier)
    _nodes_ensure(region=region)
    instance_id = uuid.uuid4()  # named before the row exists: the instances it preempts point at it

    with transaction.atomic():
        quota_check(user=user, gpu_model=gpu_model, count=gpu_count * node_count)
        member_limits_check(account=user, member_id=actor.pk, count=gpu_count * node_count, launching=True)
        _funds_check(user=user, hourly_fen=hourly)
        # NoCapacity here rolls everything back: the user gets the reason and nothing was created.
        if node_count == 1:
            node, displaced = _gpus_reserve_for(
                region=region,
                gpu_model=gpu_model,
                count=gpu_count,
                tier=tier,
                instance_id=instance_id,
                owner_id=user.pk,
            )
            extra = []
        else:
            (head, *others), displaced = _gpus_reserve_nodes_for(
                region=region,
                gpu_model=gpu_model,
                count=gpu_count,
                nodes=node_count,
                tier=tier,
                instance_id=instance_id,
                owner_id=user.pk,
            )
            node, extra = head, [n.name for n in others]
        now = timezone.now()
        # Nobody else can see the row before this transaction commits, so the walk through
        # requested → scheduling → provisioning is written at once (the path the table allows).
        path = [("", S.REQUESTED), (S.REQUESTED, S.SCHEDULING), (S.SCHEDULING, S.PROVISIONING)]
        assert all(dst in ALLOWED[src] for src, dst in path[1:])
        instance = Instance(
            id=instance_id,
            owner=user,
            created_by=actor,
            name=name,
            region=region,
            gpu_model=gpu_model,
            gpu_count=gpu_count,
            node_count=node_count,
            extra_nodes=extra,
            image=image,
            image_ref=image.pinned_ref,
            disk_gb=disk_gb,
            backend_alias=region.backend_alias,
            app_launch=dataclasses.asdict(app) if app is not None else {},
            hourly_price_fen=hourly,
            tier=tier,
            checkpoint_command=checkpoint_command,
            displaced_others=displaced,
            status=S.PROVISIONING,
            status_reason=stored(gettext_noop("Placed on %(node)s"), node=", ".join([node.name, *extra])),
            node_id=node.pk,
            created_at=now,
            status_changed_at=now,
        )
        sql.insert(instance)  # a fixed statement (``core.sql``): the launch's widest row, on every launch
        if ssh_keys:
            instance.ssh_keys.set(ssh_keys)
        if volumes:
            volume_hooks().attach_at_launch(user=user, instance=instance, volumes=volumes)
        if ports:
            import_string(ports_hook)(instance=instance, ports=ports)
        reasons = [
            stored(gettext_noop("Launched by %(who)s"), who=actor.email),
            stored(gettext_noop("Finding a node")),
            instance.status_reason,
        ]
        instance_events_write(
            moves=[(instance.pk, old, new, reason) for (old, new), reason in zip(path, reasons, strict=True)], at=now
        )
        if actor.pk != user.pk:  # a team's (a person's own launch has no audit log: spare the query)
            team_event_record(
                account=user,
                actor=actor,
                action=TeamEvent.Action.INSTANCE_LAUNCHED,
                target=name,
                details={"instance": str(instance.pk), "gpus": gpu_count * node_count, "gpu_model": gpu_model.slug},
            )
        _enqueue("instance_provision_task", instance.pk)
        transaction.on_commit(lambda: instance_notify(instance))
    # As written, with its region, model, image and owner at hand: reading it back would cost a five-table join.
    return instance


def _enqueue(task_name: str, instance_id) -> None:
    """Run ``instances.tasks.<task_name>`` on the instance once this transaction commits (by name: the
    tasks module sits above this one)."""
    enqueue_on_commit(f"instances.tasks.{task_name}", str(instance_id))


def app_launch_from(data: dict) -> AppLaunch | None:
    """The stored ``Instance.app_launch`` as the backend's dataclass (None for a plain instance)."""
    if not data:
        return None
    webui = app_launch_from(data.get("webui") or {})
    return AppLaunch(
        webui=webui,
        name=data["name"],
        argv=tuple(data["argv"]),
        image=data.get("image", ""),
        port=int(data.get("port", 8000)),
        env=tuple((str(k), str(v)) for k, v in data.get("env", [])),
        health_path=data.get("health_path", "/"),
        serves_base_path=bool(data.get("serves_base_path", True)),
        cpu=app_launch_from(data.get("cpu") or {}),
        image_slug=data.get("image_slug", ""),
        gpu_required=bool(data.get("gpu_required", True)),
    )


def _authorized_keys(instance: Instance) -> tuple[str, ...]:
    """The owner's chosen keys, then those ``INSTANCES_AUTHORIZED_KEYS_HOOK`` adds (the SSH gateway's key for
    this instance, ``gateway.keys``): the instances app names the hook, so it never imports the gateway."""
    keys = tuple(_ssh_public_keys(instance))
    hook = getattr(settings, "INSTANCES_AUTHORIZED_KEYS_HOOK", "")
    return keys + tuple(import_string(hook)(instance=instance)) if hook else keys


def _spec(instance: Instance) -> InstanceSpec:
    return InstanceSpec(
        node=instance.node.name if instance.node else "",
        gpu_model=instance.gpu_model.slug,
        gpu_count=instance.gpu_count,
        image=instance.image.slug,
        disk_gb=instance.disk_gb,
        ssh_public_keys=_authorized_keys(instance),
        region=instance.region.slug,
        owner_ref=f"user-{instance.owner_id}",
        app=app_launch_from(instance.app_launch),
        volumes=volume_hooks().mounts_for_boot(instance=instance),
        nodes=instance.node_count,
        peer_nodes=tuple(instance.extra_nodes or ()),
        interruptible=instance.tier == Instance.Tier.INTERRUPTIBLE,
        checkpoint_command=instance.checkpoint_command or "",
        pin=bool(instance.displaced_others),
        image_ref=instance.image_ref,
        tenant=tenant_for(account_id=instance.owner_id),
        cpus=float(instance.gpu_model.cpu_cores_per_card * instance.gpu_count),
        memory_gb=instance.gpu_model.ram_gb_per_card * instance.gpu_count,
        image_bytes=instance.image.size_bytes,
    )


def _ssh_public_keys(instance: Instance) -> list[str]:
    """The public keys chosen at launch, less those of people who may no longer operate it.

    On a personal account the keys are the owner's, always allowed. On a team's they are its launcher's
    (``instance_launch`` takes only the actor's own): recomputed at every create, start and restart, so
    a launcher who left the team, or lost the role to launch, is not let in by the next boot. (The SSH
    gateway checks each connection as well.)
    """
    if instance.created_by_id is None or instance.created_by_id == instance.owner_id:
        keys = getattr(instance, "ssh_public_keys", None)  # read with the instance by ``_get``
        if keys is None:
            keys = instance.ssh_keys.values_list("public_key", flat=True)
        return list(keys)
    rows = list(instance.ssh_keys.order_by(*SSHKey._meta.ordering).values_list("public_key", "user_id"))
    people = {user_id for _key, user_id in rows if user_id != instance.owner_id}
    memberships = {
        m.user_id: m
        for m in Membership.objects.filter(team__account_id=instance.owner_id, user_id__in=people).only(
            "id", "role", "user_id", "team_id"
        )
    }
    allowed = {instance.owner_id} | {
        user_id
        for user_id in people
        if membership_access(membership=memberships.get(user_id), user_id=user_id, created_by_id=instance.created_by_id)
        == Access.OPERATE
    }
    return [key for key, user_id in rows if user_id in allowed]


def _get(instance_id) -> Instance | None:
    """The instance as a task works on it: with its catalogue rows, node and owner, and the public keys
    its machine is built with (in the same statement: every create, start and restart needs them).

    A fixed statement (``core.sql``): every boot of every instance reads it, and compiling the ORM's
    five joins and subquery cost several times what running them does.
    """
    user_model = get_user_model()
    through = Instance.ssh_keys.through
    layout = ((Instance, "i"), (GpuModel, "g"), (Image, "im"), (Region, "r"), (user_model, "u"), (Node, "n"))
    row = sql.fetch_one(
        f"SELECT {', '.join(sql.columns(m, a) for m, a in layout)}, ARRAY("  # noqa: S608 (names from _meta)
        f"SELECT k.public_key FROM {sql.table(SSHKey)} k JOIN {sql.table(through)} ik "
        f"ON ik.{through._meta.get_field('sshkey').column} = k.id "
        f"WHERE ik.{through._meta.get_field('instance').column} = i.id ORDER BY {sql.ordering(SSHKey, 'k')}) "
        f"FROM {sql.table(Instance)} i JOIN {sql.table(GpuModel)} g ON g.id = i.gpu_model_id "
        f"JOIN {sql.table(Image)} im ON im.id = i.image_id JOIN {sql.table(Region)} r ON r.id = i.region_id "
        f"JOIN {sql.table(user_model)} u ON u.id = i.owner_id LEFT JOIN {sql.table(Node)} n ON n.id = i.node_id "
        "WHERE i.id = %s",
        [instance_id],
    )
    if row is None:
        return None
    instance, instance.gpu_model, instance.image, instance.region, instance.owner, instance.node = sql.from_joined_row(
        row, *layout
    )
    instance.ssh_public_keys = row[-1]
    return instance


def instance_provision(*, instance_id) -> bool:
    """Task body: have the provider create the machine placed at launch, then see whether it is up.
    True while it boots (poll it again soon).

    Repeatable: the machine is named by the instance's key, so a second run (a redelivered task, or a
    rerun after a worker died between the provider's answer and our update) finds the same machine.
    """
    instance = _get(instance_id)
    if instance is None or instance.status != S.PROVISIONING:
        return False
    if instance.displaced_others and Instance.objects.filter(preempted_for=instance.pk, status=S.PREEMPTING).exists():
        # Its cards are still with the machines it preempted, in their grace period: the last of them
        # to go off enqueues this task again (``instances.preemption``); until then, poll.
        return True
    backend = get_backend(instance.backend_alias)
    try:
        state = backend.create(key=instance.key, spec=_spec(instance))
    except PermanentBackendError as exc:
        _launch_fail(instance=instance, reason=str(exc))
        return False
    observation = backend.poll(key=instance.key, state=state)
    if observation.state == Observed.RUNNING:
        # Up at once (a fast provider): the state is saved with the move to running, one write for both.
        instance.backend_state = state
        return instance_sync(instance_id=instance.pk, instance=instance, observation=observation)
    if Instance.objects.filter(pk=instance.pk, status=S.PROVISIONING).update(backend_state=state):
        instance.backend_state = state
        return instance_sync(instance_id=instance.pk, instance=instance, observation=observation)
    return instance_sync(instance_id=instance.pk)


def _launch_fail(*, instance: Instance, reason: str) -> None:
    if instance_transition(
        instance_id=instance.pk,
        src=S.PROVISIONING,
        dst=S.FAILED,
        reason=stored(gettext_noop("Launch failed: %(r)s"), r=reason),
    ):
        _destroy_quietly(instance)


def _destroy_quietly(instance: Instance) -> None:
    """Make sure nothing is left at the provider; if it cannot answer now, the reconciler will."""
    try:
        get_backend(instance.backend_alias).destroy(key=instance.key, state=instance.backend_state)
    except (TransientBackendError, PermanentBackendError):
        logger.warning("destroy of %s deferred to the reconciler", instance.pk, exc_info=True)
    except Exception:
        # Called while settling an instance, often because the backend itself is what broke.
        logger.exception("destroy of %s raised; deferred to the reconciler", instance.pk)


# --- Sync: compare the provider's truth with ours and move on -----------------------------------------------


def instance_sync(*, instance_id, instance: Instance | None = None, observation=None) -> bool:
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
    redrive = age >= getattr(settings, "INSTANCES_REDRIVE_AFTER_S", 60)
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
        Node.objects.filter(pk__in=taken).update(free_cards=Greatest(F("free_cards") - instance.gpu_count, 0))
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
                if instance.node_count == 1:
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
        # rest go back when it is off: ``instances.capacity``): the provider's hosts are not followed.
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
                free_cards=Least(F("free_cards") + instance.gpu_count, F("total_cards"))
            )
            Node.objects.filter(pk=target.pk).update(free_cards=F("free_cards") - instance.gpu_count)
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


def _stop_quietly(instance: Instance) -> None:
    try:
        get_backend(instance.backend_alias).stop(key=instance.key, state=instance.backend_state)
    except (TransientBackendError, PermanentBackendError):
        logger.warning("stop of %s failed", instance.pk, exc_info=True)
    except Exception:
        # As ``_destroy_quietly``: the reconciler stops a machine that runs on behind a stopped instance.
        logger.exception("stop of %s raised", instance.pk)


# --- Operations that cannot finish: a task that raised, an instance past its deadline ---------------------

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


# --- Operations: stop, start, restart, release ---------------------------------------------------------


def _provider_stop(backend: ProvisioningBackend, instance: Instance) -> None:
    backend.stop(key=instance.key, state=instance.backend_state)  # its answer is not kept: the state stays


def _provider_start(backend: ProvisioningBackend, instance: Instance) -> dict:
    node = instance.node.name if instance.node else ""
    return backend.start(key=instance.key, state=instance.backend_state, node=node, spec=_spec(instance))


def _provider_restart(backend: ProvisioningBackend, instance: Instance) -> dict | None:
    return backend.restart(key=instance.key, state=instance.backend_state, spec=_spec(instance))


def _provider_release(backend: ProvisioningBackend, instance: Instance) -> None:
    backend.destroy(key=instance.key, state=instance.backend_state)


@dataclasses.dataclass(frozen=True)
class Operation:
    """An operation a user asks for and a worker carries out at the provider.

    Asking (``_operation_request``) moves the instance to ``busy`` from any status ``ALLOWED`` lets go
    there, and enqueues ``task`` on commit; the task calls ``instance_operation_execute``, which does
    ``provider`` and then settles the instance at ``then``, or (None) polls it until the provider's
    truth settles it (``instance_sync``). Messages are ``gettext_noop`` ids, translated when used.
    """

    busy: str  # the status while it is under way, and the only one its task acts in
    done: frozenset[str]  # where asking again changes nothing: already under way, or done
    requested: str  # the reason recorded when the caller gives none
    refused: str  # why it cannot be asked now: a whole sentence with a ``%(status)s`` slot ("": never)
    task: str  # the task of ``instances.tasks`` that carries it out
    # The backend's call: the machine's new state to keep, or None to keep the one it has.
    provider: Callable[[ProvisioningBackend, Instance], dict | None]
    # Where the provider's permanent refusal leaves the instance, and why (a message with the provider's
    # words as ``%(r)s``; "" for its words alone). None: the refusal fails the task, which settles it.
    refusal: tuple[str, str] | None
    then: tuple[str, str] | None = None  # where it settles, and why, once the provider has done it
    places: bool = False  # it needs cards again (placement, quota, balance), as a launch does

    @property
    def sources(self) -> frozenset[str]:
        return frozenset(src for src, targets in ALLOWED.items() if self.busy in targets)


OPERATIONS = {
    # GPUs freed, disk kept (and billed as storage).
    "stop": Operation(
        busy=S.STOPPING,
        done=frozenset({S.STOPPING, S.STOPPED}),
        requested=gettext_noop("Stop requested"),
        refused=gettext_noop("An instance that is %(status)s cannot be stopped."),
        task="instance_stop_task",
        provider=_provider_stop,
        refusal=(S.LOST, ""),
    ),
    # Placed on a node again, or refused and left stopped with why.
    "start": Operation(
        busy=S.STARTING,
        done=frozenset({S.STARTING, S.RUNNING}),
        requested=gettext_noop("Start requested; placed on %(node)s"),
        refused=gettext_noop("An instance that is %(status)s cannot be started."),
        task="instance_start_task",
        provider=_provider_start,
        refusal=(S.STOPPED, gettext_noop("Start failed: %(r)s")),
        places=True,
    ),
    # A reboot in place, keeping the GPUs (and their meter).
    "restart": Operation(
        busy=S.RESTARTING,
        done=frozenset({S.RESTARTING}),
        requested=gettext_noop("Restart requested"),
        refused=gettext_noop("An instance that is %(status)s cannot be restarted."),
        task="instance_restart_task",
        provider=_provider_restart,
        refusal=(S.LOST, ""),
    ),
    # The machine and its disk destroyed; billing closes at the request. Every live status may release.
    "release": Operation(
        busy=S.RELEASING,
        done=frozenset({S.RELEASING, S.RELEASED}),
        requested=gettext_noop("Release requested"),
        refused="",
        task="instance_release_task",
        provider=_provider_release,
        refusal=None,
        then=(S.RELEASED, gettext_noop("Released; disk deleted")),
    ),
}


def _operation_name(op: Operation) -> str:
    return next(name for name, known in OPERATIONS.items() if known is op)


# The operation under way in each of its busy statuses (what the sync re-drives).
_UNDER_WAY = {op.busy: op for op in OPERATIONS.values()}


def _refuse(instance: Instance, message: str) -> None:
    """Refuse an operation; ``message`` is a whole translated sentence with a ``%(status)s`` slot.

    Whole sentences, not a verb slotted into one: word order and the verb's form differ by language.
    """
    raise OperationNotAllowed(message % {"status": instance.get_status_display()})


# The team audit event of each operation a person asks for (stop, start, release; not restart).
_TEAM_EVENTS = {
    "stop": TeamEvent.Action.INSTANCE_STOPPED,
    "start": TeamEvent.Action.INSTANCE_STARTED,
    "release": TeamEvent.Action.INSTANCE_RELEASED,
}


def _operation_request(op: Operation, *, instance: Instance, reason: str, actor=None) -> Instance:
    """Ask for ``op``: refused in a status it cannot start from, nothing more when under way or done.

    ``actor``: the person asking (None: the console itself, e.g. auto-stop). In a team the move is
    written to the team's audit log in the same transaction."""
    if instance.status in op.done:
        return instance
    if instance.status not in op.sources:
        _refuse(instance, _(op.refused))
    if op.places:
        _nodes_ensure(region=instance.region)
    with transaction.atomic():
        changes, params = {}, {}
        if op.places:
            changes = _instance_place(instance)
            params["node"] = ", ".join([changes["node"].name, *changes.get("extra_nodes", [])])
        moved = instance_transition(
            instance_id=instance.pk,
            src=instance.status,
            dst=op.busy,
            reason=reason or stored(op.requested, **params),
            **changes,
        )
        if moved:
            _enqueue(op.task, instance.pk)
            action = _TEAM_EVENTS.get(_operation_name(op))
            if action and actor is not None and actor.pk != instance.owner_id:
                team_event_record(
                    account=instance.owner_id,
                    actor=actor,
                    action=action,
                    target=instance.name,
                    details={"instance": str(instance.pk)},
                )
        elif changes:  # someone else started (or released) it first: give the cards back
            transaction.set_rollback(True)
    instance.refresh_from_db()
    return instance


def _instance_place(instance: Instance) -> dict:
    """Reserve the cards a stopped instance needs to run again, within quota and balance; returns the
    instance's new ``node`` (and a cluster's ``extra_nodes``). Call it inside the transaction that moves it."""
    gpu_model, region = instance.gpu_model, instance.region
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


def instance_operation_execute(*, instance_id, operation: str) -> None:
    """Task body of ``OPERATIONS[operation]``: have the provider do it, then finish the move (or poll
    until the provider's truth finishes it). Only while the instance is busy with it: a repeat does nothing."""
    op = OPERATIONS[operation]
    instance = _get(instance_id)
    if instance is None or instance.status != op.busy:
        return
    if (
        op.places
        and instance.displaced_others
        and Instance.objects.filter(preempted_for=instance.pk, status=S.PREEMPTING).exists()
    ):
        return  # as ``instance_provision``: the machines it preempts are still in their grace period
    try:
        state = op.provider(get_backend(instance.backend_alias), instance)
    except PermanentBackendError as exc:
        if op.refusal is None:
            raise
        dst, why = op.refusal
        reason = stored(why, r=str(exc)) if why else str(exc)
        instance_transition(instance_id=instance.pk, src=op.busy, dst=dst, reason=reason)
        return
    if state is not None:
        Instance.objects.filter(pk=instance.pk, status=op.busy).update(backend_state=state)
    if op.then is not None:
        dst, why = op.then
        instance_transition(instance_id=instance.pk, src=op.busy, dst=dst, reason=stored(why))
    else:
        instance_sync(instance_id=instance.pk)


def instance_stop(*, instance: Instance, reason: str = "", actor=None) -> Instance:
    """Stop a running instance: GPUs freed, disk kept (and billed as storage). Stopping twice is harmless."""
    return _operation_request(OPERATIONS["stop"], instance=instance, reason=reason, actor=actor)


def instance_start(*, instance: Instance, reason: str = "", actor=None) -> Instance:
    """Start a stopped instance: it needs cards again (placement, quota, balance), or stays stopped with why."""
    return _operation_request(OPERATIONS["start"], instance=instance, reason=reason, actor=actor)


def instance_restart(*, instance: Instance, reason: str = "", actor=None) -> Instance:
    """Reboot in place, keeping the GPUs (and their meter)."""
    return _operation_request(OPERATIONS["restart"], instance=instance, reason=reason, actor=actor)


def instance_release(*, instance: Instance, reason: str = "", actor=None) -> Instance:
    """Destroy the instance and its disk; billing closes now. Releasing twice is harmless."""
    return _operation_request(OPERATIONS["release"], instance=instance, reason=reason, actor=actor)


def instance_rename(*, instance: Instance, name: str) -> Instance:
    name = (name or "").strip()
    if not name:
        raise LaunchInvalid(_("Give the instance a name."), field="name")
    if len(name) > 64:
        raise LaunchInvalid(_("Names are at most 64 characters."), field="name")
    if instance.status == S.RELEASED:
        _refuse(instance, _("An instance that is %(status)s cannot be renamed."))
    Instance.objects.filter(pk=instance.pk).update(name=name)
    instance.name = name
    transaction.on_commit(lambda: instance_notify(instance))
    return instance


def instance_auto_stop_set(
    *, instance: Instance, at: datetime | None = None, idle_minutes: int | None = None
) -> Instance:
    """Stop automatically at ``at`` and/or after ``idle_minutes`` of idle GPUs; ``None`` clears a rule."""
    if at is not None and at <= timezone.now():
        raise LaunchInvalid(_("Choose a time in the future."), field="auto_stop_at")
    if idle_minutes is not None and not (5 <= idle_minutes <= 7 * 24 * 60):
        raise LaunchInvalid(_("Idle minutes must be between 5 and 10080."), field="auto_stop_idle_minutes")
    if instance.status in (S.RELEASING, S.RELEASED, S.FAILED, S.LOST):
        _refuse(instance, _("An instance that is %(status)s cannot have an auto-stop timer."))
    Instance.objects.filter(pk=instance.pk).update(auto_stop_at=at, auto_stop_idle_minutes=idle_minutes)
    instance.auto_stop_at, instance.auto_stop_idle_minutes = at, idle_minutes
    transaction.on_commit(lambda: instance_notify(instance))
    return instance


def instances_auto_stop(*, now: datetime | None = None) -> int:
    """Periodic: stop instances whose stop time has come or that nobody has used for long enough.

    Use is judged twice, and any sign of it counts (the shorter idle time wins): by the provider
    (GPU work, and on this host also notebooks, SSH and VS Code sessions) and by the GPU samples the
    console stored (``INSTANCES_GPU_METRICS_HOOKS``), which is what makes idle stop work on engines
    whose provider reports no use (Kubernetes, Slurm). Neither knowing: not stopped."""
    now = now or timezone.now()
    stopped = 0
    due = Instance.objects.select_related("owner").filter(status=S.RUNNING, auto_stop_at__lte=now)
    for instance in due:
        instance_stop(instance=instance, reason=stored(gettext_noop("Auto-stop: the scheduled time was reached")))
        Instance.objects.filter(pk=instance.pk).update(auto_stop_at=None)
        stopped += 1
    candidates = list(
        Instance.objects.select_related("owner", "created_by").filter(
            status=S.RUNNING, auto_stop_idle_minutes__isnull=False
        )
    )
    from_samples = (
        gpu_metrics_hooks().gpu_idle_seconds(running_since={i.pk: i.running_since for i in candidates}, now=now)
        if candidates
        else {}
    )
    for instance in candidates:
        observation = get_backend(instance.backend_alias).poll(key=instance.key, state=instance.backend_state)
        known = [s for s in (observation.idle_seconds, from_samples.get(instance.pk)) if s is not None]
        if not known:
            continue
        idle = min(known)
        if instance.auto_stop_snoozed_at is not None:
            idle = min(idle, int((now - instance.auto_stop_snoozed_at).total_seconds()))
        limit = instance.auto_stop_idle_minutes * 60
        if idle >= limit:
            instance_stop(
                instance=instance,
                reason=stored(gettext_noop("Auto-stop: idle for %(m)d minutes"), m=instance.auto_stop_idle_minutes),
            )
            Instance.objects.filter(pk=instance.pk).update(auto_stop_warned_at=None, auto_stop_snoozed_at=None)
            _idle_stopped_notify(instance=instance)
            stopped += 1
        elif idle >= limit - _auto_stop_warning_s(limit):
            if instance.auto_stop_warned_at is None:
                _auto_stop_warn(instance=instance, seconds_left=limit - idle, now=now)
        elif instance.auto_stop_warned_at is not None:
            # Used again since the warning: the next idle stretch gets a warning of its own.
            Instance.objects.filter(pk=instance.pk).update(auto_stop_warned_at=None)
    return stopped


def _idle_stopped_notify(*, instance: Instance) -> None:
    values = {"name": instance.name, "m": instance.auto_stop_idle_minutes}
    notify(
        user=instance.owner,
        kind=Kind.IDLE_STOPPED,
        render=lambda: Message(
            title=_("%(name)s was stopped: idle for %(m)d minutes") % values,
            body=_(
                "Auto-stop stopped your instance %(name)s after %(m)d idle minutes. Its disk is kept; start it again from its page."
            )
            % values,
        ),
        link=f"/instances/{instance.pk}/",
        data={"instance_id": str(instance.pk), "instance_name": instance.name, "idle_minutes": values["m"]},
        actor=instance.created_by,
    )


def _auto_stop_warning_s(limit_s: int) -> int:
    """How long before an idle stop its owner is warned: ``INSTANCES_AUTO_STOP_WARNING_S``, at most
    half the idle limit (a 5-minute rule warns after 2.5 minutes)."""
    return min(getattr(settings, "INSTANCES_AUTO_STOP_WARNING_S", 600), limit_s // 2)


def _auto_stop_warn(*, instance: Instance, seconds_left: int, now: datetime) -> None:
    """Tell the owner (e-mail, and a notice on any open console page) that an idle stop is near, with
    the way to keep it running: a long job the console cannot see (a detached process, a download)
    must not be cut off without a word."""
    if not Instance.objects.filter(pk=instance.pk, auto_stop_warned_at__isnull=True).update(auto_stop_warned_at=now):
        return  # another worker warned first
    minutes = max(1, round(seconds_left / 60))
    values = {"name": instance.name, "m": minutes}
    notify(
        user=instance.owner,
        kind=Kind.IDLE_WARNING,
        render=lambda: Message(
            title=_("%(name)s will stop in %(m)d minutes: nobody is using it") % values,
            body=_(
                "Your instance %(name)s has been idle, so auto-stop will stop it in about %(m)d minutes "
                "(its disk is kept). To keep it running, press “Keep running” on its page or use it."
            )
            % values,
        ),
        link=f"/instances/{instance.pk}/",
        data={"instance_id": str(instance.pk), "instance_name": instance.name, "minutes_left": minutes},
        actor=instance.created_by,
    )
    transaction.on_commit(lambda: instance_notify(instance))


def instance_auto_stop_snooze(*, instance: Instance) -> Instance:
    """ "Keep running": the idle clock starts again now, and the warning is withdrawn."""
    if instance.status != S.RUNNING:
        _refuse(instance, _("An instance that is %(status)s is not counting idle time."))
    now = timezone.now()
    Instance.objects.filter(pk=instance.pk).update(auto_stop_snoozed_at=now, auto_stop_warned_at=None)
    instance.auto_stop_snoozed_at, instance.auto_stop_warned_at = now, None
    transaction.on_commit(lambda: instance_notify(instance))
    return instance


def instances_stop_for_funds(*, user_id: int) -> int:
    """Billing's out-of-funds hook: stop the user's running instances, keeping their disks.

    Then billing's default hook stops whatever else still bills compute (meters of other apps);
    storage, the stopped instances' disks included, keeps running. Returns the instances stopped.
    """
    stopped = 0
    for instance in Instance.objects.filter(owner_id=user_id, status__in=(S.RUNNING, S.RESTARTING)):
        instance_stop(
            instance=instance,
            reason=stored(
                gettext_noop("Stopped because the balance ran out; the disk is kept. Top up to start it again.")
            ),
        )
        stopped += 1
    meters_stop_unpaid(user_id=user_id)
    return stopped
