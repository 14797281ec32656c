"""Reads for the instances app, scoped to the user who asks: a stranger's instance is a 404 by construction."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Max, QuerySet, Sum
from django.http.request import split_domain_port
from django.shortcuts import get_object_or_404
from django.utils import timezone

from instances.backends import BackendError, get_backend
from instances.models import GpuModel, GpuQuota, Image, Instance, InstanceEvent, Node, QuotaRequest, Region


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


def capacity_by_region_model() -> dict[tuple[int, int], dict]:
    """Free cards per (region, GPU model): the total and the most on one node (what one instance can get)."""
    rows = (
        Node.objects.filter(is_healthy=True)
        .values("region_id", "gpu_model_id")
        .annotate(free=Sum("free_cards"), best=Max("free_cards"), total=Sum("total_cards"))
    )
    return {
        (r["region_id"], r["gpu_model_id"]): {"free": r["free"], "best": r["best"], "total": r["total"]} for r in rows
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
        Instance.objects.filter(owner=user, status__in=Instance.HOLDING_GPUS)
        .values("gpu_model_id")
        .annotate(n=Sum("gpu_count"))
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
    from billing.selectors import runway_get

    capacity = capacity_by_region_model()
    quotas = {row["gpu_model"].pk: row for row in quota_table_for(user=user)}
    regions = list(Region.objects.filter(is_active=True))
    gpus = []
    for gpu in GpuModel.objects.filter(is_active=True):
        q = quotas[gpu.pk]
        gpus.append(
            {
                "id": gpu.pk,
                "slug": gpu.slug,
                "name": gpu.name,
                "memory_gb": gpu.memory_gb,
                "price_fen": gpu.price_per_card_hour_fen,
                "quota": q["limit"],
                "used": q["used"],
                "regions": {
                    str(region.pk): capacity.get((region.pk, gpu.pk), {"free": 0, "best": 0, "total": 0})
                    for region in regions
                },
            }
        )
    runway = runway_get(user=user)
    return {
        "regions": [{"id": r.pk, "slug": r.slug, "name": r.name} for r in regions],
        "gpus": gpus,
        "balance_fen": runway.balance_fen,
        "burn_fen_per_hour": runway.burn_fen_per_hour,
        "min_runway_s": settings.BILLING_MIN_RUNWAY_S,
        "disk_price_fen_per_gb_day": settings.INSTANCES_DISK_PRICE_FEN_PER_GB_DAY,
    }


def images_active() -> QuerySet[Image]:
    return Image.objects.filter(is_active=True)


def quota_requests_for(*, user) -> QuerySet[QuotaRequest]:
    return QuotaRequest.objects.filter(user=user).select_related("gpu_model").order_by("-created_at")


def quota_requests_pending() -> QuerySet[QuotaRequest]:
    return QuotaRequest.objects.filter(status=QuotaRequest.Status.PENDING).select_related("user", "gpu_model")


def quota_request_context(*, request: QuotaRequest) -> dict:
    """What staff weigh when deciding: the user's spend, current usage of the model, free capacity."""
    from billing.models import Entry, Transaction

    spent = -(
        Entry.objects.filter(transaction__kind=Transaction.Kind.USAGE, account__owner=request.user).aggregate(
            n=Sum("amount")
        )["n"]
        or 0
    )
    used = (
        Instance.objects.filter(
            owner=request.user, gpu_model=request.gpu_model, status__in=Instance.HOLDING_GPUS
        ).aggregate(n=Sum("gpu_count"))["n"]
        or 0
    )
    free = Node.objects.filter(gpu_model=request.gpu_model, is_healthy=True).aggregate(n=Sum("free_cards"))["n"] or 0
    total = Node.objects.filter(gpu_model=request.gpu_model).aggregate(n=Sum("total_cards"))["n"] or 0
    return {"spent_fen": spent, "used": used, "free": free, "total": total}


def instance_entry_points(*, instance: Instance, host: str) -> dict:
    """How the owner reaches a running instance: ``{jupyterlab_url, vscode_url, ssh_command}``, None for what
    its backend does not offer (or while it is not running). URLs go through the console's proxy.

    ``host`` names the SSH host when ``INSTANCES_SSH_HOST`` is not set (the host the browser used; a
    port on it is the web server's, not SSH's, and is dropped).
    """
    empty = {"jupyterlab_url": None, "vscode_url": None, "ssh_command": None}
    if instance.status != Instance.Status.RUNNING:
        return empty
    try:
        offered = get_backend(instance.backend_alias).entry_points(key=instance.key, state=instance.backend_state)
    except (BackendError, ImproperlyConfigured):
        return empty
    base = f"{settings.CONSOLE_PROXY_PREFIX}{instance.pk}/"
    proxy_host = getattr(settings, "CONSOLE_PROXY_HOST", "")
    if proxy_host:  # user servers on a host of their own (see console/proxy.py)
        base = f"//{proxy_host}{base}"
    ssh_host = getattr(settings, "INSTANCES_SSH_HOST", "") or split_domain_port(host)[0] or host
    ssh = None
    if offered.ssh_port:
        user = f"{offered.ssh_user}@" if offered.ssh_user else ""
        ssh = f"ssh -p {offered.ssh_port} {user}{ssh_host}"
    return {
        "jupyterlab_url": f"{base}lab/" if "lab" in offered.web else None,
        "vscode_url": f"{base}code/" if "code" in offered.web else None,
        "ssh_command": ssh,
    }
