"""Marketplace pages. Each view serves the full page or, for an htmx request, just the part that changes.

Deployments are in the acting context (``teams.access``): the principal's; deploying needs
``resources.launch``; the actions need OPERATE (its creator, or a team admin). A deployment shown but
not operable has no buttons, and a forced POST is a 403."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from apps_marketplace import fit, selectors, services
from apps_marketplace.forms import (
    FITTED_PARAMETERS,
    AppFilterForm,
    DatasetFilterForm,
    DeployForm,
    FitForm,
    ModelFilterForm,
)
from apps_marketplace.models import App, AppCategory, DatasetEntry, Deployment, ModelEntry
from apps_marketplace.parameters import app_command_render, app_parameters_clean
from core.drf import error_body
from instances.errors import InstanceError
from instances.hooks import gpu_metrics_hooks
from teams.access import Access, request_acting, request_can, require_access, require_permission, resource_access
from teams.roles import Permission

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


def _deploy_form(app: App, form: FitForm, table: fit.FitTable | None, user=None) -> tuple[DeployForm, int | None]:
    """The Deploy form, preselected from the fit check: its inputs, then the recommended GPUs when they
    fit (else the cheapest that does); and the hourly price of that choice in fen."""
    model = form.cleaned_data["model"] if form.is_valid() else None
    initial = DeployForm.initial_for(app, model)
    if form.is_valid():
        initial.update(
            model=model.repo_id if model else None,
            precision=form.cleaned_data["precision"],
            context_length=form.cleaned_data["context_length"],
        )
    row = table and (table.recommended if table.recommended and table.recommended.fits else table.cheapest)
    if row:
        initial["gpu_model"], initial["gpu_count"] = row.gpu.slug, row.cards
    price = row.price_per_hour_fen if row else None
    return DeployForm(initial=initial, app=app, user=user), price


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
    context["cpu_image"] = selectors.app_cpu_image(app=app)
    context["deploy_form"], context["deploy_price"] = _deploy_form(app, form, table, user=request_acting(request)[0])
    context["may_deploy"] = request_can(request, Permission.RESOURCES_LAUNCH)
    if app.gpu_required:
        context["memory_matrix"] = selectors.app_memory_matrix(app=app, models=context["served_models"])
    return render(request, "apps_marketplace/detail.html", context)


# --- Deployments ------------------------------------------------------------------------------------

_SHOW_KEY = "deployment-key-{}"


@login_required
@require_POST
def app_deploy(request: HttpRequest, slug: str) -> HttpResponse:
    """The app page's Deploy button: the fit check, then an instance through the instances services."""
    app = selectors.app_get(slug=slug)
    require_permission(request, Permission.RESOURCES_LAUNCH, _deploy_refused())
    form = DeployForm(request.POST, app=app, user=request_acting(request)[0])
    if form.is_valid():
        data = form.cleaned_data
        try:
            deployment, key = services.deployment_create(
                user=request_acting(request)[0],
                actor=request.user,
                app=app,
                model=data["model"],
                parameters=form.parameters(),
                gpu_model=data["gpu_model"],
                gpu_count=data["gpu_count"],
                region=data["region"],
                volumes=form.volumes(),
            )
        except InstanceError as exc:
            field = (exc.field or "").replace("parameters.", "param_", 1)
            field = {"mount_path": "volume_path", "mode": "volume_mode", "instance": "volume"}.get(field, field)
            form.add_error(field if field in form.fields else None, exc.message)
        else:
            request.session[_SHOW_KEY.format(deployment.pk)] = key
            return redirect("deployment_detail", deployment_id=deployment.pk)
    return render(request, "apps_marketplace/deploy.html", {"app": app, "deploy_form": form, "tab": "apps"}, status=400)


def _deploy_refused() -> str:
    return _("Your role in this team does not allow deploying apps.")


def _deployment(request: HttpRequest, deployment_id, *, operate: bool = False) -> Deployment:
    """The acting account's deployment (404 otherwise), with ``can_operate`` for the page; 403 when
    ``operate`` is asked of a person who may only see it."""
    deployment = selectors.deployment_get_for(user=request_acting(request)[0], deployment_id=deployment_id)
    access = require_access(
        request,
        owner_id=deployment.owner_id,
        created_by_id=deployment.created_by_id,
        operate=operate,
        message=_("Only the deployment's creator or a team admin can change it."),
    )
    deployment.can_operate = access == Access.OPERATE
    return deployment


@login_required
def deployment_list(request: HttpRequest) -> HttpResponse:
    require_permission(request, Permission.RESOURCES_VIEW, _("Your role in this team does not show its resources."))
    deployments = [
        (deployment, selectors.deployment_status(deployment=deployment))
        for deployment in selectors.deployment_list_for(user=request_acting(request)[0])
    ]
    return render(
        request,
        "apps_marketplace/deployments.html",
        {
            "deployments": deployments,
            "tab": "deployments",
            "may_deploy": request_can(request, Permission.RESOURCES_LAUNCH),
        },
    )


def _deployment_context(request: HttpRequest, deployment) -> dict:
    return {
        "deployment": deployment,
        "can_operate": deployment.can_operate,
        "instance": deployment.instance,
        "status": selectors.deployment_status(deployment=deployment),
        "endpoints": selectors.deployment_endpoints(
            deployment=deployment, host=request.get_host(), scheme=request.scheme
        ),
    }


@login_required
def deployment_detail(request: HttpRequest, deployment_id) -> HttpResponse:
    deployment = _deployment(request, deployment_id)
    context = _deployment_context(request, deployment)
    if request.GET.get("partial") == "status":
        return render(request, "apps_marketplace/_deployment_status.html", context)
    context.update(
        api_key=request.session.pop(_SHOW_KEY.format(deployment.pk), None),
        redeploy_form=DeployForm(
            initial={**DeployForm.initial_for(deployment.app, deployment.model), **_current(deployment)},
            app=deployment.app,
        ),
        tab="deployments",
        # The GPU charts of its instance, as the instance page shows them (instances.hooks.gpu_metrics).
        gpu_panels=gpu_metrics_hooks().detail_panels(instance=deployment.instance),
    )
    return render(request, "apps_marketplace/deployment.html", context)


def _current(deployment) -> dict:
    values = {
        key if key in FITTED_PARAMETERS else f"param_{key}": value for key, value in deployment.parameters.items()
    }
    if deployment.model:
        values["model"] = deployment.model.repo_id
    return values


@login_required
@require_POST
def deployment_action(request: HttpRequest, deployment_id, verb: str) -> HttpResponse:
    """Stop, start, restart, redeploy, regenerate the key or delete; a refusal is shown on the page."""
    deployment = _deployment(request, deployment_id, operate=True)
    verbs = {
        "stop": services.deployment_stop,
        "start": services.deployment_start,
        "restart": services.deployment_restart,
    }
    try:
        if verb in verbs:
            verbs[verb](deployment=deployment)
        elif verb == "delete":
            services.deployment_delete(deployment=deployment, actor=request.user)
            messages.success(request, _("Deployment deleted; its instance is being released."))
            return redirect("deployments")
        elif verb == "regenerate-key":
            key = services.deployment_key_regenerate(deployment=deployment)
            request.session[_SHOW_KEY.format(deployment.pk)] = key
        elif verb == "redeploy":
            form = DeployForm(request.POST, app=deployment.app)
            for name in ("region", "gpu_model", "gpu_count"):  # the instance keeps its GPUs
                form.fields[name].required = False
            if not form.is_valid():
                for error in form.errors.values():
                    messages.error(request, " ".join(error))
                return redirect("deployment_detail", deployment_id=deployment.pk)
            services.deployment_redeploy(
                deployment=deployment, model=form.cleaned_data["model"], parameters=form.parameters()
            )
        else:
            raise Http404
    except InstanceError as exc:
        messages.error(request, exc.message)
    return redirect("deployment_detail", deployment_id=deployment.pk)


def deployment_readiness(request: HttpRequest, deployment_id) -> JsonResponse:
    """``GET /api/v1/deployments/<id>/readiness/``: whether the app is ready, for its owner (signed in) or a
    caller with the deployment's API key (``Authorization: Bearer dk-…``), e.g. a script waiting to send
    requests. Anyone else, another deployment's key included, gets the same 404 as a deployment that
    does not exist."""
    not_found = JsonResponse(error_body(code="not_found", message=_("Not found.")), status=404)
    deployment = Deployment.objects.select_related("app", "instance").filter(pk=deployment_id).first()
    if deployment is None:
        return not_found
    # A person who may see it, in any context (a team's member too, while a member), or its key.
    access = resource_access(user=request.user, owner_id=deployment.owner_id, created_by_id=deployment.created_by_id)
    if access == Access.NONE:
        scheme, _space, key = request.headers.get("Authorization", "").partition(" ")
        try:
            services.deployment_key_check(deployment=deployment, key=key.strip() if scheme.lower() == "bearer" else "")
        except services.DeploymentKeyRefused:
            return not_found
    status = selectors.deployment_status(deployment=deployment)
    return JsonResponse({"id": str(deployment.pk), "status": status.code, "ready": status.is_ready})
