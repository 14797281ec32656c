"""Reads for the marketplace. The catalogues are public to every signed-in user, so nothing here is
scoped to a user; deployments (a later issue) will be, through their own selectors."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Count, Q, QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from apps_marketplace import fit
from apps_marketplace.models import App, DatasetEntry, Deployment, ModelEntry
from core.user_content import content_host
from instances.entry_points import entry_points_saved
from instances.models import GpuModel, Image, Instance

GB = fit.GB

# Size buckets: key -> (label, minimum bytes, maximum bytes); bounds are inclusive-exclusive.
SIZE_BUCKETS = {
    "lt1": (_("Under 1 GB"), None, 1 * GB),
    "1-10": (_("1–10 GB"), 1 * GB, 10 * GB),
    "10-100": (_("10–100 GB"), 10 * GB, 100 * GB),
    "100-1000": (_("100 GB–1 TB"), 100 * GB, 1000 * GB),
    "gt1000": (_("Over 1 TB"), 1000 * GB, None),
}

SORTS = {
    "name": (_("Name"), ["organisation", "name"]),
    "-size": (_("Largest first"), ["-size_bytes", "name"]),
    "size": (_("Smallest first"), ["size_bytes", "name"]),
    "-updated": (_("Recently updated"), ["-updated_at", "name"]),
}


def _catalogue_filter(queryset: QuerySet, filters: dict) -> QuerySet:
    """Apply a cleaned :class:`~apps_marketplace.forms.CatalogueFilterForm`'s data."""
    for word in (filters.get("q") or "").split():
        queryset = queryset.filter(
            Q(name__icontains=word)
            | Q(organisation__icontains=word)
            | Q(repo_id__icontains=word)
            | Q(description__icontains=word)
        )
    if filters.get("task"):
        queryset = queryset.filter(task=filters["task"])
    if filters.get("licence"):
        queryset = queryset.filter(licence__iexact=filters["licence"])
    if filters.get("organisation"):
        queryset = queryset.filter(organisation__iexact=filters["organisation"])
    if filters.get("size"):
        _label, low, high = SIZE_BUCKETS[filters["size"]]
        if low is not None:
            queryset = queryset.filter(size_bytes__gte=low)
        if high is not None:
            queryset = queryset.filter(size_bytes__lt=high)
    return queryset.order_by(*SORTS[filters.get("sort") or "name"][1], "pk")


def model_entry_list(*, filters: dict | None = None) -> QuerySet[ModelEntry]:
    return _catalogue_filter(ModelEntry.objects.filter(is_active=True), filters or {})


def dataset_entry_list(*, filters: dict | None = None) -> QuerySet[DatasetEntry]:
    return _catalogue_filter(DatasetEntry.objects.filter(is_active=True), filters or {})


def catalogue_facets(*, model_cls: type[ModelEntry] | type[DatasetEntry]) -> dict[str, list[str]]:
    """The licences and organisations present, for the filter menus (two queries)."""
    listed = model_cls.objects.filter(is_active=True)
    return {
        "licences": list(listed.order_by("licence").values_list("licence", flat=True).distinct()),
        "organisations": list(listed.order_by("organisation").values_list("organisation", flat=True).distinct()),
    }


def app_list(*, category: str = "", q: str = "") -> QuerySet[App]:
    queryset = (
        App.objects.filter(is_active=True)
        .select_related("default_model")
        .annotate(model_count=Count("served_models", filter=Q(served_models__is_active=True)))
    )
    if category:
        queryset = queryset.filter(category=category)
    for word in q.split():
        queryset = queryset.filter(
            Q(name__icontains=word) | Q(tagline__icontains=word) | Q(description__icontains=word)
        )
    return queryset.order_by("sort_order", "name")


def app_get(*, slug: str) -> App:
    return get_object_or_404(
        App.objects.filter(is_active=True).select_related("default_model").prefetch_related("parameters"), slug=slug
    )


# The context length the fit check assumes for an app that has no context_length parameter (image and
# speech engines: no KV cache, so the context does not change their fit).
DEFAULT_CONTEXT_FOR_NON_LLM = 2048


def app_fit_defaults(*, app: App) -> dict:
    """The app's default precision and context length, for the fit check, the deploy form and the API."""
    parameters = {parameter.key: parameter for parameter in app.parameters.all()}
    precision = parameters.get("precision")
    context = parameters.get("context_length")
    return {
        "precision": precision.default if precision else (app.precisions[0] if app.precisions else "fp16"),
        "context_length": int(context.default) if context and context.default else DEFAULT_CONTEXT_FOR_NON_LLM,
    }


def model_spec(model: ModelEntry) -> fit.ModelSpec:
    return fit.ModelSpec(
        parameter_count=model.parameter_count or 0,
        size_bytes=model.size_bytes,
        num_layers=model.num_layers,
        hidden_size=model.hidden_size,
        num_attention_heads=model.num_attention_heads,
        num_kv_heads=model.num_kv_heads,
        head_dim=model.head_dim,
        max_context_length=model.max_context_length,
    )


def gpu_offers() -> list[fit.GpuOffer]:
    return [
        fit.GpuOffer(slug=g.slug, name=g.name, memory_gb=g.memory_gb, price_per_card_hour_fen=g.price_per_card_hour_fen)
        for g in GpuModel.objects.filter(is_active=True).order_by("sort_order", "name")
    ]


def app_fit_table(*, app: App, model: ModelEntry, workload: fit.Workload) -> fit.FitTable:
    """The fit check for ``model`` served by ``app`` on every active GPU model at 1, 2, 4 and 8 cards."""
    recommended = app.recommendation_for(model)
    return fit.fit_table(
        model_spec(model),
        workload,
        gpu_offers(),
        tensor_parallel=app.supports_tensor_parallel,
        image_size_bytes=app.image_size_bytes + app.webui_image_size_bytes,
        startup_seconds=app.startup_seconds,
        recommended=recommended,
    )


def app_memory_matrix(*, app: App, models) -> dict:
    """GPU memory on one card for each model the app serves at each precision it offers, at its default
    context and one request: the table behind "which precision do I need for this card?"."""
    context_length = app_fit_defaults(app=app)["context_length"]
    precisions = [p for p in app.precisions if p in fit.BITS_PER_PARAMETER]
    rows = []
    for model in models:
        cells = []
        for precision in precisions:
            workload = fit.Workload(
                precision=precision, context_length=min(context_length, model.max_context_length or context_length)
            )
            try:
                cells.append(fit.memory_estimate(model_spec(model), workload).total)
            except fit.FitInputError:
                cells.append(None)
        rows.append({"model": model, "cells": cells})
    return {"precisions": precisions, "context_length": context_length, "rows": rows}


# --- Deployments ------------------------------------------------------------------------------------


def deployment_list_for(*, user) -> QuerySet[Deployment]:
    """The user's deployments, newest first; another user's are never in it."""
    return Deployment.objects.filter(owner=user).select_related(
        "app", "model", "instance", "instance__gpu_model", "instance__region"
    )


def deployment_get_for(*, user, deployment_id) -> Deployment:
    """One of the user's deployments, or a 404 (another user's included)."""
    return get_object_or_404(deployment_list_for(user=user), pk=deployment_id)


@dataclass(frozen=True)
class DeploymentStatus:
    """Where a deployment stands, derived from its instance and the app's start-up steps."""

    code: str  # a Deployment.Step value, or stopping/stopped/failed/deleting
    label: str
    badge: str
    steps: list[dict]  # [{"code", "label", "state": done|current|todo}]

    @property
    def is_ready(self) -> bool:
        return self.code == Deployment.Step.READY


def _step_state(i: int, current: int, *, ready: bool) -> str:
    if i < current or (i == current and ready):
        return "done"
    return "current" if i == current else "todo"


def deployment_status(*, deployment: Deployment, now=None) -> DeploymentStatus:
    """The status a user sees, from the instance's status and timestamps (never stored separately).

    Scheduling until the instance has a node; then pulling the image for the estimated pull time, then
    loading the model, while the machine boots; ready when it runs. On the simulated cloud the machine
    runs no process, so running is ready; a backend that runs the app adds a probe of the app's port.
    """
    instance = deployment.instance
    status = instance.status
    s = Instance.Status
    now = now or timezone.now()
    order = list(Deployment.Step)
    if status in (s.REQUESTED, s.SCHEDULING):
        current = Deployment.Step.SCHEDULING
    elif status in (s.PROVISIONING, s.STARTING, s.RESTARTING):
        pull_s = (deployment.app.image_size_bytes + deployment.app.webui_image_size_bytes) // fit.IMAGE_PULL_BYTES_PER_S
        elapsed = (now - instance.status_changed_at).total_seconds()
        current = Deployment.Step.PULLING if elapsed < pull_s else Deployment.Step.LOADING
    elif status == s.RUNNING:
        current = Deployment.Step.READY
    else:
        current = None
    if current is not None:
        index = order.index(current)
        steps = [
            {
                "code": step.value,
                "label": step.label,
                "state": _step_state(i, index, ready=current == Deployment.Step.READY),
            }
            for i, step in enumerate(order)
        ]
        badge = "green" if current == Deployment.Step.READY else "blue"
        return DeploymentStatus(code=current.value, label=str(current.label), badge=badge, steps=steps)
    others = {
        s.STOPPING: ("stopping", _("Stopping"), "yellow"),
        s.STOPPED: ("stopped", _("Stopped"), ""),
        s.RELEASING: ("deleting", _("Deleting"), "yellow"),
        s.RELEASED: ("deleted", _("Deleted"), ""),
        s.FAILED: ("failed", _("Failed"), "red"),
        s.LOST: ("failed", _("Failed"), "red"),
    }
    code, label, badge = others[status]
    return DeploymentStatus(code=code, label=str(label), badge=badge, steps=[])


def deployment_endpoints(*, deployment: Deployment, host: str, scheme: str = "https") -> dict:
    """Where the app answers: ``{serving, webui_url, app_url, api_base_url}``.

    The console's proxy serves an app at ``/i/<instance>/app/`` only on a backend that runs it (its
    entry points offer "app"); elsewhere ``serving`` is false and ``webui_url`` is None, so no page shows
    a dead link. ``api_base_url`` is the OpenAI-compatible base URL the app takes behind that proxy.
    """
    instance = deployment.instance
    # What the worker saved when the machine booted: a list of deployments asks no provider.
    web = entry_points_saved(instance)["web"]
    serving, has_webui = "app" in web, "webui" in web
    base = f"{settings.CONSOLE_PROXY_PREFIX}{instance.pk}/app"
    # The instance's own host when user content has a domain of its own (``core.user_content.content_host``).
    origin = f"//{content_host(instance.pk)}" if getattr(settings, "CONSOLE_PROXY_HOST", "") else f"//{host}"
    app = deployment.app
    return {
        "serving": serving,
        # A separate WebUI (Open WebUI in front of vLLM) is served beside the server's API.
        "webui_url": (
            f"{settings.CONSOLE_PROXY_PREFIX}{instance.pk}/webui{app.webui_path or '/'}"
            if has_webui
            else f"{base}{app.webui_path or '/'}"
        )
        if serving
        else None,
        "app_url": f"{scheme}:{origin}{base}/" if serving else None,
        "api_base_url": f"{scheme}:{origin}{base}{app.api_path}" if app.openai_compatible else None,
    }


def app_cpu_image(*, app: App) -> Image | None:
    """The catalogue image that runs the app's CPU variant (its digest once published), if any."""
    return Image.objects.filter(slug=app.cpu_image).first() if app.cpu_image else None
