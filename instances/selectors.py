"""Reads for the instances app, scoped to the user who asks: a stranger's instance is a 404 by construction."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Count, F, Max, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce
from django.http.request import split_domain_port
from django.shortcuts import get_object_or_404
from django.utils import timezone

from billing.models import Entry, Transaction
from billing.selectors import runway_get
from core.user_content import proxy_link
from instances.boot import image_contents
from instances.entry_points import entry_points_saved
from instances.models import (
    GpuModel,
    GpuQuota,
    Image,
    Instance,
    InstanceEvent,
    InstanceSecret,
    Node,
    QuotaRequest,
    Region,
    Reservation,
    StrayMachine,
)
from instances.quota import quota_effective, quota_usage
from providers import BackendError, backend_aliases, get_backend
from vault.selectors import secret_list_for


def instance_list_for(*, user, include_released: bool = False) -> QuerySet[Instance]:
    qs = Instance.objects.filter(owner=user).select_related("gpu_model", "region", "image")
    if not include_released:
        qs = qs.exclude(status=Instance.Status.RELEASED)
    return qs.order_by("-created_at")


def instance_get_for(*, user, instance_id) -> Instance:
    return get_object_or_404(
        Instance.objects.select_related("gpu_model", "region", "image", "node", "owner"), pk=instance_id, owner=user
    )


def instance_events(*, instance: Instance) -> QuerySet[InstanceEvent]:
    return instance.events.order_by("created_at", "id")


def instance_start_queue_position(instance: Instance) -> int | None:
    """Its place in its region and model's line of starts (1: the next to start when cards free up);
    None when it is not waiting in line (``instances.capacity.start_queue``). No query when not in line."""
    if instance.start_queued_at is None or instance.status != Instance.Status.STOPPED:
        return None
    ahead = Instance.objects.filter(
        Q(start_queued_at__lt=instance.start_queued_at)
        | Q(start_queued_at=instance.start_queued_at, pk__lt=instance.pk),
        status=Instance.Status.STOPPED,
        region_id=instance.region_id,
        gpu_model_id=instance.gpu_model_id,
    ).count()
    return ahead + 1


@dataclass(frozen=True)
class StartOutlook:
    """How a start of a stopped instance would fare now, from the capacity the console already knows.

    ``fits``: a node (each node, for a cluster) of its region has its cards free now, so a start gets
    them unless someone takes them first. ``free``/``best``: cards free in the region / the most on one
    node. ``waiting``: instances in that region and model's line for cards. ``frees_at``: the earliest
    auto-stop already set on a running instance of that model in the region: cards known to free up
    then (other stops are not known in advance). ``quota``/``quota_used``/``cards``: its owner's quota
    of the model, the cards they hold, and what the start needs. ``disk_moves``: its disk lives on the
    region's shared storage (``disk_follows_node_loss``), so a start takes cards on whichever node has
    them: there is no node to move it from, and the page says so."""

    fits: bool
    free: int
    best: int
    waiting: int
    frees_at: datetime | None
    quota: int
    quota_used: int
    cards: int
    disk_moves: bool = False

    @property
    def over_quota(self) -> bool:
        """Its cards would exceed its owner's quota: a start is refused whatever is free, and waiting
        in line would not help."""
        return self.quota_used + self.cards > self.quota


def instance_start_outlook(instance: Instance) -> StartOutlook | None:
    """The outlook of starting ``instance`` with cards now; None when it is not a stopped instance that
    could start, or is already waiting in line (its place says more). A few statements."""
    if instance.status != Instance.Status.STOPPED or instance.start_queued_at is not None:
        return None
    cap = capacity_by_region_model(region_id=instance.region_id, gpu_model_id=instance.gpu_model_id).get(
        (instance.region_id, instance.gpu_model_id)
    ) or {"free": 0, "best": 0, "best_on_demand": 0, "fits": {}, "waiting": 0}
    count, nodes = instance.gpu_count, instance.node_count
    if nodes > 1:
        fits = cap["fits"].get(str(count), 0) >= nodes
    else:
        # On demand, one node's cards may be taken back from interruptible work (``capacity.takeback``).
        on_demand = instance.tier != Instance.Tier.INTERRUPTIBLE
        fits = max(cap["best"], (cap["best_on_demand"] or 0) if on_demand else 0) >= count
    frees_at = (
        Instance.objects.filter(
            status=Instance.Status.RUNNING,
            region_id=instance.region_id,
            gpu_model_id=instance.gpu_model_id,
            no_gpu=False,
            auto_stop_at__gt=timezone.now(),
        )
        .order_by("auto_stop_at")
        .values_list("auto_stop_at", flat=True)
        .first()
    )
    return StartOutlook(
        fits=fits,
        free=cap["free"] or 0,
        best=cap["best"] or 0,
        waiting=cap["waiting"],
        frees_at=frees_at,
        quota=quota_effective(user=instance.owner, gpu_model=instance.gpu_model),
        quota_used=quota_usage(user=instance.owner, gpu_model=instance.gpu_model),
        cards=count * nodes,
        disk_moves=_disk_moves(instance),
    )


def _disk_moves(instance: Instance) -> bool:
    try:
        return bool(get_backend(instance.backend_alias).disk_follows_node_loss)
    except (BackendError, ImproperlyConfigured):
        return False


def regions_offered() -> QuerySet[Region]:
    """Active regions whose backend is configured: a region pointing at a missing backend is not offered."""
    return Region.objects.filter(is_active=True, backend_alias__in=backend_aliases())


def capacity_by_region_model(
    *, region_id: int | None = None, gpu_model_id: int | None = None
) -> dict[tuple[int, int], dict]:
    """Free cards per (region, GPU model): the total and the most on one node (what one instance can get),
    ``fits``: per card count, how many nodes have that many free (how large a cluster can get), and
    ``waiting``: how many stopped instances wait in that line for cards (``instances.capacity.start_queue``).

    Only nodes of the region's own backend count: those are the ones placement uses. ``best_on_demand``
    adds the cards of interruptible instances an on-demand launch may preempt (``instances.capacity.takeback``).
    ``region_id`` and ``gpu_model_id`` narrow it to one line (an instance page's outlook).
    """
    narrow = {k: v for k, v in (("region_id", region_id), ("gpu_model_id", gpu_model_id)) if v is not None}
    fits = {f"fit{n}": Count("id", filter=Q(free_cards__gte=n)) for n in Instance.GPU_COUNTS}
    preemptible = (
        Instance.objects.filter(
            node=OuterRef("pk"),
            tier=Instance.Tier.INTERRUPTIBLE,
            status=Instance.Status.RUNNING,
            node_count=1,
            no_gpu=False,
        )
        .order_by()
        .values("node")
        .annotate(cards=Sum("gpu_count"))
        .values("cards")
    )
    waiting = {
        (r, g): n
        for r, g, n in Instance.objects.filter(status=Instance.Status.STOPPED, start_queued_at__isnull=False, **narrow)
        .order_by()
        .values_list("region_id", "gpu_model_id")
        .annotate(n=Count("id"))
    }
    rows = (
        Node.objects.filter(is_healthy=True, backend_alias=F("region__backend_alias"), **narrow)
        .annotate(reclaimable=F("free_cards") + Coalesce(Subquery(preemptible), 0))
        .values("region_id", "gpu_model_id")
        .annotate(
            free=Sum("free_cards"),
            best=Max("free_cards"),
            best_on_demand=Max("reclaimable"),
            total=Sum("total_cards"),
            **fits,
        )
    )
    return {
        (r["region_id"], r["gpu_model_id"]): {
            "free": r["free"],
            "best": r["best"],
            "best_on_demand": r["best_on_demand"],
            "total": r["total"],
            "fits": {str(n): r[f"fit{n}"] for n in Instance.GPU_COUNTS},
            "waiting": waiting.get((r["region_id"], r["gpu_model_id"]), 0),
        }
        for r in rows
    }


def quota_table_for(*, user) -> list[dict]:
    """Each active GPU model with the user's quota, cards in use and any active grant."""
    now = timezone.now()
    base = dict(GpuQuota.objects.filter(user=user, cards__isnull=False).values_list("gpu_model_id", "cards"))
    grants = {
        r["gpu_model_id"]: r
        for r in QuotaRequest.objects.filter(user=user, status=QuotaRequest.Status.APPROVED, expires_at__gt=now)
        .values("gpu_model_id")
        .annotate(cards=Max("granted_cards"), until=Max("expires_at"))
    }
    used = dict(
        Instance.objects.filter(owner=user, status__in=Instance.HOLDING_GPUS, no_gpu=False)
        .values("gpu_model_id")
        .annotate(n=Sum(F("gpu_count") * F("node_count")))
        .values_list("gpu_model_id", "n")
    )
    pending = set(
        QuotaRequest.objects.filter(user=user, status=QuotaRequest.Status.PENDING).values_list(
            "gpu_model_id", flat=True
        )
    )
    rows = []
    for gpu in GpuModel.objects.filter(is_active=True):
        base_cards = base.get(gpu.pk, settings.INSTANCES_DEFAULT_GPU_QUOTA)
        grant = grants.get(gpu.pk)
        limit = max(base_cards, grant["cards"] if grant else 0)
        rows.append(
            {
                "gpu_model": gpu,
                "base": base_cards,
                "limit": limit,
                "used": used.get(gpu.pk, 0),
                "grant_until": grant["until"] if grant and grant["cards"] > base_cards else None,
                "pending": gpu.pk in pending,
            }
        )
    return rows


def launch_options_for(*, user) -> dict:
    """Everything the launch page needs to say, before any click, what can be launched and why not."""
    capacity = capacity_by_region_model()
    quotas = {row["gpu_model"].pk: row for row in quota_table_for(user=user)}
    regions = list(regions_offered())
    models = list(GpuModel.objects.filter(is_active=True))
    gpus = []
    summaries = {region.pk: {"free": 0, "total": 0, "gpus": [], "from_price_fen": None} for region in regions}
    for gpu in models:
        for region in regions:
            cap = capacity.get((region.pk, gpu.pk))
            if cap and cap["total"]:
                summary = summaries[region.pk]
                summary["free"] += cap["free"]
                summary["total"] += cap["total"]
                summary["gpus"].append(gpu.name)
                price = gpu.price_per_card_hour_fen
                summary["from_price_fen"] = min(price, summary["from_price_fen"] or price)
        q = quotas[gpu.pk]
        gpus.append(
            {
                "id": gpu.pk,
                "slug": gpu.slug,
                "name": gpu.name,
                "memory_gb": gpu.memory_gb,
                "price_fen": gpu.price_per_card_hour_fen,
                "spot_price_fen": gpu.spot_price_fen,
                "quota": q["limit"],
                "used": q["used"],
                "regions": {
                    str(region.pk): capacity.get(
                        (region.pk, gpu.pk),
                        {"free": 0, "best": 0, "total": 0, "fits": {str(n): 0 for n in Instance.GPU_COUNTS}},
                    )
                    for region in regions
                },
            }
        )
    runway = runway_get(user=user)
    last = instance_last_choice_for(user=user)
    gpu_by_region = {
        str(r.pk): launch_default_gpu(
            gpus=models, region=r, capacity=capacity, last_gpu_id=last["gpu_model_id"] if last else None
        )
        for r in regions
    }
    offered = {r.pk for r in regions}
    region_id = last["region_id"] if last and last["region_id"] in offered else (regions[0].pk if regions else None)
    return {
        # Where the form starts: the region and, per region, the GPU model to preselect (see
        # ``launch_default_gpu``); the page moves to the region's own when the region changes.
        "defaults": {"region": region_id, "gpu_by_region": gpu_by_region},
        # Each region with what it offers now: free and total cards, its GPU models, its lowest price.
        "regions": [
            {"id": r.pk, "slug": r.slug, "name": r.name, "max_nodes": _max_nodes(r), **summaries[r.pk]} for r in regions
        ],
        "gpus": gpus,
        "balance_fen": runway.balance_fen,
        "burn_fen_per_hour": runway.burn_fen_per_hour,
        "min_runway_s": settings.BILLING_MIN_RUNWAY_S,
        "disk_price_fen_per_gb_day": settings.INSTANCES_DISK_PRICE_FEN_PER_GB_DAY,
        "preemption_grace_s": getattr(settings, "INSTANCES_PREEMPTION_GRACE_S", 30),
    }


def launch_images(*, regions: list[Region], saved: Iterable[Image] = ()) -> list[dict]:
    """The catalogue's images as the launch page lists them: size, contents, and for each region and GPU
    model how many of its healthy nodes hold the image in their cache (a launch there needs no pull),
    from what the reconciler stored (``Node.cached_images``), never asked of a provider. Two queries."""
    nodes = Node.objects.filter(region__in=regions, is_healthy=True).values_list(
        "region_id", "gpu_model_id", "cached_images"
    )
    groups: dict[tuple[int, int], list[set]] = {}
    for region_id, gpu_model_id, cached in nodes:
        groups.setdefault((region_id, gpu_model_id), []).append(set(cached or ()))
    rows = []
    # The catalogue's, then the person's own saved images (``instances.images``), marked as theirs.
    for image in [*Image.objects.filter(is_active=True), *saved]:
        key = image.cache_key
        rows.append(
            {
                "id": image.pk,
                "image": image,
                "saved": image.owner_id is not None,
                "contents": image_contents(image),
                "cache": [
                    {
                        "region_id": region_id,
                        "gpu_model_id": gpu_model_id,
                        "cached": sum(1 for held in group if key in held),
                        "nodes": len(group),
                    }
                    for (region_id, gpu_model_id), group in sorted(groups.items())
                ],
            }
        )
    return rows


def instance_last_choice_for(*, user) -> dict | None:
    """``{"region_id", "gpu_model_id"}`` of the user's most recent instance, released ones included."""
    return Instance.objects.filter(owner=user).order_by("-created_at").values("region_id", "gpu_model_id").first()


def launch_default_gpu(
    *, gpus: list[GpuModel], region: Region, capacity: dict, last_gpu_id: int | None = None
) -> int | None:
    """The GPU model the launch page preselects in ``region``: the user's last choice while it has a
    free card there, else the cheapest model with one, else the cheapest of all (the page says why
    it cannot launch). Never the priciest by accident: a newcomer holding a ¥10 trial credit starts
    on a card it can afford for hours, not on an H200."""

    def has_room(gpu_id: int) -> bool:
        return (capacity.get((region.pk, gpu_id)) or {}).get("best", 0) >= 1

    if last_gpu_id is not None and has_room(last_gpu_id) and any(g.pk == last_gpu_id for g in gpus):
        return last_gpu_id
    candidates = [g for g in gpus if has_room(g.pk)] or gpus
    if not candidates:
        return None
    return min(candidates, key=lambda g: (g.price_per_card_hour_fen, g.sort_order, g.name)).pk


def _max_nodes(region: Region) -> int:
    """How many nodes one instance may span in ``region``: its backend's limit and the console's."""
    try:
        backend_max = get_backend(region.backend_alias).max_nodes
    except (BackendError, ImproperlyConfigured, KeyError):
        backend_max = 1
    return min(backend_max, settings.INSTANCES_MAX_NODES)


def images_active() -> QuerySet[Image]:
    return Image.objects.filter(is_active=True)


def quota_requests_for(*, user) -> QuerySet[QuotaRequest]:
    return QuotaRequest.objects.filter(user=user).select_related("gpu_model").order_by("-created_at")


def quota_requests_pending() -> QuerySet[QuotaRequest]:
    return QuotaRequest.objects.filter(status=QuotaRequest.Status.PENDING).select_related(
        "user", "user__team", "gpu_model"
    )


def quota_requests_waiting_count() -> int:
    """How many requests wait for staff: the staff menu's badge, on every page, so one COUNT."""
    return QuotaRequest.objects.filter(status=QuotaRequest.Status.PENDING).count()


@dataclass(frozen=True)
class QuotaReviewItem:
    """A waiting request measured against the review SLA (``INSTANCES_QUOTA_REVIEW_SLA_MIN``)."""

    request: QuotaRequest
    age_min: int  # minutes since it was sent
    sla_min: int
    due_at: datetime

    @property
    def overdue(self) -> bool:
        return self.age_min >= self.sla_min

    @property
    def minutes_left(self) -> int:
        return max(self.sla_min - self.age_min, 0)

    @property
    def minutes_over(self) -> int:
        return max(self.age_min - self.sla_min, 0)

    @property
    def sla_pct(self) -> int:
        """How much of the SLA is used, capped at 100 for the bar."""
        return min(100, self.age_min * 100 // max(self.sla_min, 1))

    @property
    def urgency(self) -> str:
        """The badge colour: red when overdue, yellow in the last third of the SLA, green before."""
        if self.overdue:
            return "red"
        return "yellow" if self.sla_pct >= 66 else "green"


def quota_review_queue(*, now: datetime | None = None) -> list[QuotaReviewItem]:
    """Waiting requests, most urgent first. One SLA for all, so the earliest deadline is the oldest
    request: overdue ones come first, the most overdue at the top; ties go to the lower id."""
    now = now or timezone.now()
    sla = int(settings.INSTANCES_QUOTA_REVIEW_SLA_MIN)
    items = []
    for request in quota_requests_pending().order_by("created_at", "id"):
        age_min = max(int((now - request.created_at).total_seconds() // 60), 0)
        items.append(
            QuotaReviewItem(
                request=request, age_min=age_min, sla_min=sla, due_at=request.created_at + timedelta(minutes=sla)
            )
        )
    return items


def quota_capacity_overview(*, now: datetime | None = None) -> dict:
    """What staff weigh against the queue: per region and GPU model the cards in service, free and held;
    per GPU model the cards granted beyond the base quota, asked for by waiting requests, and a forecast.

    Quotas and grants are per model, not per region (a grant may be used in any region offering the
    model), so granted and asked cards are per model. The forecast is the demand if every waiting request
    were approved and used at once: the cards held now plus what each request adds beyond the cards its
    user already holds of the model (a request asks for a total, not for more on top), against the
    healthy total. Reserved cards (reservations in their window) are shown per region and per model.
    Seven queries, whatever the fleet's size.
    """
    now = now or timezone.now()
    cards = (
        Node.objects.values("region_id", "gpu_model_id")
        .annotate(
            total=Sum("total_cards", filter=Q(is_healthy=True)),
            free=Sum("free_cards", filter=Q(is_healthy=True)),
            out_of_service=Sum("total_cards", filter=Q(is_healthy=False)),
        )
        .order_by()
    )
    held: dict[tuple[int, int], int] = {}  # (region, model) -> cards
    held_by_user: dict[tuple[int, int], int] = {}  # (model, owner) -> cards
    for row in (
        Instance.objects.filter(status__in=Instance.HOLDING_GPUS, no_gpu=False)
        .values("region_id", "gpu_model_id", "owner_id")
        .annotate(n=Sum(F("gpu_count") * F("node_count")))
        .order_by()
    ):
        held[row["region_id"], row["gpu_model_id"]] = held.get((row["region_id"], row["gpu_model_id"]), 0) + row["n"]
        owner = (row["gpu_model_id"], row["owner_id"])
        held_by_user[owner] = held_by_user.get(owner, 0) + row["n"]
    requests: dict[int, dict] = {
        row["gpu_model_id"]: {**row, "asked": 0, "extra": 0, "waiting": 0}
        for row in QuotaRequest.objects.filter(status=QuotaRequest.Status.APPROVED, expires_at__gt=now)
        .values("gpu_model_id")
        .annotate(granted=Sum("granted_cards"), grants=Count("id"))
        .order_by()
    }
    for user_id, gpu_id, asked in QuotaRequest.objects.filter(status=QuotaRequest.Status.PENDING).values_list(
        "user_id", "gpu_model_id", "cards"
    ):
        row = requests.setdefault(
            gpu_id, {"gpu_model_id": gpu_id, "granted": 0, "grants": 0, "asked": 0, "extra": 0, "waiting": 0}
        )
        row["asked"] += asked
        row["extra"] += max(asked - held_by_user.get((gpu_id, user_id), 0), 0)
        row["waiting"] += 1
    reserved = reservations_reserved_now(now=now)
    regions = {r.pk: r for r in Region.objects.all()}
    models = {g.pk: g for g in GpuModel.objects.all()}
    by_region: dict[int, list[dict]] = {}
    by_model: dict[int, dict] = {}
    for row in cards:
        region, gpu = regions[row["region_id"]], models[row["gpu_model_id"]]
        line = {
            "gpu_model": gpu,
            "total": row["total"] or 0,
            "free": row["free"] or 0,
            "out_of_service": row["out_of_service"] or 0,
            "held": held.get((region.pk, gpu.pk), 0),
            "reserved": reserved.get((region.pk, gpu.pk), 0),
        }
        by_region.setdefault(region.pk, []).append(line)
        model = by_model.setdefault(gpu.pk, {"gpu_model": gpu, "total": 0, "free": 0, "held": 0, "reserved": 0})
        for key in ("total", "free", "held", "reserved"):
            model[key] += line[key]
    for gpu_id in requests:  # a model asked for but with no node yet still shows
        by_model.setdefault(gpu_id, {"gpu_model": models[gpu_id], "total": 0, "free": 0, "held": 0, "reserved": 0})
    for gpu_id, model in by_model.items():
        asked = requests.get(gpu_id, {})
        model.update(
            granted=asked.get("granted") or 0,
            grants=asked.get("grants", 0),
            asked=asked.get("asked", 0),
            extra=asked.get("extra", 0),
            waiting=asked.get("waiting", 0),
        )
        model["forecast"] = model["held"] + model["extra"]
        model["forecast_pct"] = model["forecast"] * 100 // model["total"] if model["total"] else None
        model["fits"] = model["forecast"] <= model["total"]
    order = lambda gpu: (gpu.sort_order, gpu.name)  # noqa: E731
    return {
        "regions": [
            {"region": regions[pk], "rows": sorted(rows, key=lambda r: order(r["gpu_model"]))}
            for pk, rows in sorted(by_region.items(), key=lambda item: regions[item[0]].name)
        ],
        "gpu_models": sorted(by_model.values(), key=lambda r: order(r["gpu_model"])),
    }


def quota_request_context(*, request: QuotaRequest) -> dict:
    """What staff weigh when deciding: the user's spend, current usage of the model, free capacity."""
    spent = -(
        Entry.objects.filter(transaction__kind=Transaction.Kind.USAGE, account__owner=request.user).aggregate(
            n=Sum("amount")
        )["n"]
        or 0
    )
    used = (
        Instance.objects.filter(
            owner=request.user, gpu_model=request.gpu_model, status__in=Instance.HOLDING_GPUS, no_gpu=False
        ).aggregate(n=Sum(F("gpu_count") * F("node_count")))["n"]
        or 0
    )
    free = Node.objects.filter(gpu_model=request.gpu_model, is_healthy=True).aggregate(n=Sum("free_cards"))["n"] or 0
    total = Node.objects.filter(gpu_model=request.gpu_model).aggregate(n=Sum("total_cards"))["n"] or 0
    return {"spent_fen": spent, "used": used, "free": free, "total": total}


def instance_entry_points(*, instance: Instance, host: str) -> dict:
    """How the owner reaches a running instance: ``{jupyterlab_url, vscode_url, ssh_command}``, None for what
    its backend does not offer (or while it is not running). URLs go through the console's proxy.

    Read from what the worker saved when the machine booted (``instances.entry_points``): no provider is
    asked, whatever the number of instances shown.

    The SSH command names the machine's host when its provider says where its sshd is (a Slurm job's
    node); else ``INSTANCES_SSH_HOST``, else ``host`` (the host the browser used; a port on it is the web
    server's, not SSH's, and is dropped).
    """
    offered = entry_points_saved(instance)
    web = offered["web"]
    base = f"{settings.CONSOLE_PROXY_PREFIX}{instance.pk}/"
    # The machine's own host when its provider names one (a Slurm node): the console's host has no such port.
    ssh_host = (
        offered.get("ssh_host") or getattr(settings, "INSTANCES_SSH_HOST", "") or split_domain_port(host)[0] or host
    )
    ssh = None
    if offered["ssh_port"]:
        user = f"{offered['ssh_user']}@" if offered["ssh_user"] else ""
        ssh = f"ssh -p {offered['ssh_port']} {user}{ssh_host}"
    return {
        # Through the hand-off when user servers have a host of their own (core.user_content.proxy_link).
        "jupyterlab_url": proxy_link(f"{base}lab/") if "lab" in web else None,
        "vscode_url": proxy_link(f"{base}code/") if "code" in web else None,
        "ssh_command": ssh,
        "gateway_command": instance_gateway_command(instance=instance, host=host),
    }


def instance_gateway_command(*, instance: Instance, host: str) -> str | None:
    """``ssh -p 2222 <instance id>@<host>``: the one SSH endpoint of the console (the ``gateway`` app), shown
    while the gateway is enabled and the instance runs. The id, not the name: names need not be unique.

    ``host`` is the host the browser used, unless ``GATEWAY_HOST`` names one (its port is the web's: dropped).
    """
    if not getattr(settings, "GATEWAY_ENABLED", False) or instance.status != Instance.Status.RUNNING:
        return None
    gateway_host = getattr(settings, "GATEWAY_HOST", "") or split_domain_port(host)[0] or host
    port = int(getattr(settings, "GATEWAY_PORT", 22))
    return f"ssh {f'-p {port} ' if port != 22 else ''}{instance.pk}@{gateway_host}"


# --- Staff: the fleet ---------------------------------------------------------------------------------------


def _totals() -> dict:
    return {"nodes": 0, "unhealthy": 0, "total": 0, "used": 0, "free": 0, "out_of_service": 0, "instances": 0}


def _add(totals: dict, node: Node) -> None:
    used = node.total_cards - node.free_cards
    totals["nodes"] += 1
    totals["total"] += node.total_cards
    totals["used"] += used
    totals["instances"] += node.instance_count
    if node.is_healthy:
        totals["free"] += node.free_cards  # what placement can still use
    else:
        totals["unhealthy"] += 1
        totals["out_of_service"] += node.free_cards


def fleet_overview() -> dict:
    """Every region with its backend and nodes (cards, health, instances on each), totals per region,
    per GPU model and for the fleet, and the unresolved stray machines per backend. Staff only.

    Read from the console's own tables (what the last ``nodes_sync`` recorded): rendering it calls no
    backend. Three queries, whatever the size of the fleet.
    """
    configured = settings.PROVISIONING_BACKENDS
    nodes = list(
        Node.objects.select_related("gpu_model")
        .annotate(
            instance_count=Count(
                "instances",
                filter=~Q(
                    instances__status__in=(Instance.Status.RELEASED, Instance.Status.FAILED, Instance.Status.LOST)
                ),
            )
        )
        .order_by("region_id", "gpu_model__sort_order", "name")
    )
    strays = dict(
        StrayMachine.objects.filter(resolved_at__isnull=True)
        .values("backend_alias")
        .annotate(n=Count("id"))
        .values_list("backend_alias", "n")
    )
    by_region: dict[int, list[Node]] = {}
    for node in nodes:
        node.used_cards = node.total_cards - node.free_cards
        by_region.setdefault(node.region_id, []).append(node)
    fleet, by_gpu = _totals(), {}
    regions = []
    for region in Region.objects.order_by("-is_active", "name"):
        config = configured.get(region.backend_alias)
        totals = _totals()
        for node in by_region.get(region.pk, []):
            _add(totals, node)
            _add(fleet, node)
            gpu = by_gpu.setdefault(node.gpu_model_id, {"gpu_model": node.gpu_model, **_totals()})
            _add(gpu, node)
        regions.append(
            {
                "region": region,
                "backend_alias": region.backend_alias,
                "backend_class": config["BACKEND"] if config else None,
                "nodes": by_region.get(region.pk, []),
                "totals": totals,
                "strays": strays.get(region.backend_alias, 0),
            }
        )
    gpu_rows = sorted(by_gpu.values(), key=lambda row: (row["gpu_model"].sort_order, row["gpu_model"].name))
    return {"regions": regions, "gpu_models": gpu_rows, "totals": fleet}


# --- Reserved capacity ---------------------------------------------------------------------------------------


def _reservations_with_usage(reservations: list[Reservation], *, now: datetime) -> list[Reservation]:
    """Set ``in_use`` (cards its holder's on-demand instances hold against it) and ``is_current`` on each.

    An account's instances of the region and model count against its reservations there in start order,
    so two reservations never both count the same card. One query, whatever the number of reservations.
    """
    current = [r for r in reservations if r.is_current(now)]
    used: dict[tuple[int, int, int], int] = {}
    if current:
        rows = (
            Instance.objects.filter(
                owner_id__in={r.account_id for r in current},
                region_id__in={r.region_id for r in current},
                gpu_model_id__in={r.gpu_model_id for r in current},
                tier=Instance.Tier.ON_DEMAND,
                status__in=Instance.HOLDING_GPUS,
                no_gpu=False,  # a run without GPU holds none
                node__isnull=False,
            )
            .values_list("owner_id", "region_id", "gpu_model_id")
            .annotate(n=Sum(F("gpu_count") * F("node_count")))
            .order_by()
        )
        used = {(owner, region, gpu): n for owner, region, gpu, n in rows}
    for reservation in sorted(reservations, key=lambda r: (r.starts_at, r.pk)):
        reservation.current = reservation.is_current(now)
        reservation.in_use = 0
        if reservation.current:
            key = (reservation.account_id, reservation.region_id, reservation.gpu_model_id)
            reservation.in_use = min(reservation.cards, used.get(key, 0))
            used[key] = used.get(key, 0) - reservation.in_use
        reservation.unused = reservation.cards - reservation.in_use
    return reservations


def reservations_for(*, user, now: datetime | None = None) -> list[Reservation]:
    """The account's reservations that have not ended (current and upcoming), with what it uses of each."""
    now = now or timezone.now()
    reservations = list(
        Reservation.objects.filter(account=user, status=Reservation.Status.ACTIVE, ends_at__gt=now)
        .select_related("region", "gpu_model")
        .order_by("starts_at", "id")
    )
    return _reservations_with_usage(reservations, now=now)


def reservation_get_for(*, user, pk: int) -> Reservation:
    """One of the account's reservations (any status); another account's is a 404."""
    reservation = get_object_or_404(Reservation.objects.select_related("region", "gpu_model"), pk=pk, account=user)
    return _reservations_with_usage([reservation], now=timezone.now())[0]


def reservations_staff_list(*, status: str = "", now: datetime | None = None, limit: int = 200) -> list[Reservation]:
    """Staff's view: every reservation (or those of ``status``), not yet ended first, with usage."""
    now = now or timezone.now()
    queryset = Reservation.objects.select_related("account", "account__team", "region", "gpu_model", "created_by")
    if status:
        queryset = queryset.filter(status=status)
    reservations = list(queryset.order_by("status", "-starts_at", "-id")[:limit])
    return _reservations_with_usage(reservations, now=now)


def reservations_staff_list_by_pk(*, pk: int) -> Reservation:
    """One reservation for staff, with usage (a 404 when none has that id)."""
    reservation = get_object_or_404(
        Reservation.objects.select_related("account", "account__team", "region", "gpu_model", "created_by"), pk=pk
    )
    return _reservations_with_usage([reservation], now=timezone.now())[0]


def reservations_reserved_now(*, now: datetime | None = None) -> dict[tuple[int, int], int]:
    """Cards reserved right now per (region, model): reservations in their window."""
    now = now or timezone.now()
    return {
        (region, gpu): n
        for region, gpu, n in Reservation.objects.filter(
            status=Reservation.Status.ACTIVE, starts_at__lte=now, ends_at__gt=now
        )
        .values_list("region_id", "gpu_model_id")
        .annotate(n=Sum("cards"))
        .order_by()
    }


def instance_secret_choices(*, instance: Instance) -> list[InstanceSecret]:
    """The secrets ``instance`` gets at boot, by name, each with ``env`` (names only: no value is read)."""
    return list(
        InstanceSecret.objects.filter(instance=instance)
        .select_related("secret")
        .defer("secret__ciphertext")
        .order_by("secret__name")
    )


def instance_secrets_offered(*, instance: Instance):
    """The owner's secrets by name for the instance page's choice, each with ``chosen_env``: None when
    the instance does not get it, else whether it is also a variable (one query, no ciphertext)."""
    chosen = InstanceSecret.objects.filter(instance_id=instance.pk, secret_id=OuterRef("pk")).values("env")[:1]
    return secret_list_for(owner=instance.owner_id).annotate(chosen_env=Subquery(chosen))


def instance_experiment_runs(instance: Instance) -> list[dict]:
    """The W&B runs the instance's programs started, newest first, as the worker last saved them
    (``instances_experiment_runs_refresh``; no provider is asked): ``{"url", "host", "name", "project",
    "entity", "id", "at"}``, ``at`` an aware datetime or None. Kept after a stop; gone with a release."""
    if instance.status == Instance.Status.RELEASED:
        return []
    return [
        {**run, "at": datetime.fromtimestamp(run["at"], tz=UTC) if isinstance(run.get("at"), int) else None}
        for run in instance.experiment_runs or []
        if isinstance(run, dict) and run.get("url")
    ]
