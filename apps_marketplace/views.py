"""Marketplace pages. Each view serves the full page or, for an htmx request, just the part that changes."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from apps_marketplace import fit, selectors
from apps_marketplace.forms import AppFilterForm, DatasetFilterForm, FitForm, ModelFilterForm
from apps_marketplace.models import App, AppCategory, DatasetEntry, ModelEntry
from apps_marketplace.parameters import app_command_render, app_parameters_clean

PAGE_SIZE = 25


@login_required
def app_index(request: HttpRequest) -> HttpResponse:
    form = AppFilterForm(request.GET)
    filters = form.cleaned_data if form.is_valid() else {}
    apps = selectors.app_list(category=filters.get("category", ""), q=filters.get("q", ""))
    context = {
        "form": form,
        "apps": apps,
        "categories": AppCategory.choices,
        "active_category": filters.get("category", ""),
        "tab": "apps",
    }
    if request.htmx:
        return render(request, "apps_marketplace/_app_grid.html", context)
    return render(request, "apps_marketplace/index.html", context)


def _catalogue(request: HttpRequest, *, form_class, select, model_cls, kind: str) -> HttpResponse:
    form = form_class(request.GET)
    entries = select(filters=form.cleaned_data) if form.is_valid() else model_cls.objects.none()
    page = Paginator(entries, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {"form": form, "page": page, "query": query.urlencode(), "kind": kind, "tab": kind}
    if request.htmx:
        return render(request, "apps_marketplace/_catalogue_results.html", context)
    context["facets"] = selectors.catalogue_facets(model_cls=model_cls)
    return render(request, "apps_marketplace/catalogue.html", context)


@login_required
def model_index(request: HttpRequest) -> HttpResponse:
    return _catalogue(
        request, form_class=ModelFilterForm, select=selectors.model_entry_list, model_cls=ModelEntry, kind="models"
    )


@login_required
def dataset_index(request: HttpRequest) -> HttpResponse:
    return _catalogue(
        request,
        form_class=DatasetFilterForm,
        select=selectors.dataset_entry_list,
        model_cls=DatasetEntry,
        kind="datasets",
    )


def _command_preview(app: App, form: FitForm, table: fit.FitTable | None) -> tuple[str, str]:
    """The start command for the chosen inputs, as a deployment would run it."""
    keys = {parameter.key for parameter in app.parameters.all()}
    values = {}
    model = None
    if form.is_valid():
        model = form.cleaned_data["model"]
        values = {
            "precision": form.cleaned_data["precision"],
            "context_length": form.cleaned_data["context_length"],
            "model_path": model.repo_id,
        }
    values = {key: value for key, value in values.items() if key in keys}
    try:
        cleaned = app_parameters_clean(app=app, values=values, model=model)
    except ValidationError:
        return "", ""
    row = table and (table.recommended if table.recommended and table.recommended.fits else table.cheapest)
    tensor_parallel = row.cards if row and app.supports_tensor_parallel else 1
    return app_command_render(app=app, values=cleaned, tensor_parallel_size=tensor_parallel)


@login_required
def app_detail(request: HttpRequest, slug: str) -> HttpResponse:
    app = selectors.app_get(slug=slug)
    # Inputs left out of the query string take the app's defaults, as in the API.
    form = FitForm({**FitForm.initial_for(app), **request.GET.dict()}, app=app)
    table = None
    if app.gpu_required and form.is_valid():
        table = selectors.app_fit_table(app=app, model=form.cleaned_data["model"], workload=form.workload())
    command, webui_command = _command_preview(app, form, table)
    context = {
        "app": app,
        "form": form,
        "table": table,
        "command": command,
        "webui_command": webui_command,
        "assumptions": {
            "utilisation": fit.GPU_MEMORY_UTILIZATION_PERCENT,
            "pull_mb_s": fit.IMAGE_PULL_BYTES_PER_S // 1000**2,
            "load_gb_s": fit.WEIGHTS_LOAD_BYTES_PER_S // 1000**3,
        },
        "tab": "apps",
    }
    if request.htmx:
        return render(request, "apps_marketplace/_fit.html", context)
    context["served_models"] = app.served_models.filter(is_active=True)
    if app.gpu_required:
        context["memory_matrix"] = selectors.app_memory_matrix(app=app, models=context["served_models"])
    return render(request, "apps_marketplace/detail.html", context)
