"""REST endpoints: the app catalogue with its fit check, the public model and dataset catalogues, and
one-click deployments (the same services and errors as the pages).

A deployment's field problem (the model does not fit, a bad parameter) is a 400 naming the field; a
business refusal from the instances app (``no_capacity``, ``quota_exceeded``, ``insufficient_funds``,
``invalid_state``) is a 409 with that code. Another account's deployment is a 404.

In the acting context, as the pages: deploying needs ``resources.launch``; stopping, starting,
redeploying, a new key and deleting need OPERATE (its creator, or a team admin); a refusal is a 403
with ``code: permission_denied`` and a message saying why.
"""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import exceptions, mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from apps_marketplace import fit, selectors, services
from apps_marketplace.forms import (
    AppFilterForm,
    CatalogueFilterForm,
    DatasetFilterForm,
    FitForm,
    ModelFilterForm,
)
from apps_marketplace.models import AppCategory, DatasetTask, ModelTask
from apps_marketplace.serializers import (
    AppSerializer,
    DatasetEntrySerializer,
    DeploymentCreatedSerializer,
    DeploymentSerializer,
    DeploySerializer,
    FitSerializer,
    ModelEntrySerializer,
    RedeploySerializer,
)
from idempotency.decorators import idempotent
from instances.api import LAUNCH_REFUSED
from instances.api import raise_as_api_error as _raise_instance_error
from instances.errors import InstanceError
from teams.access import request_acting, require_permission
from teams.resource_api import TeamResourceViewSet, resource_schema
from teams.roles import Permission


def _form_or_400(form):
    if not form.is_valid():
        raise exceptions.ValidationError({field: list(messages) for field, messages in form.errors.items()})
    return form.cleaned_data


def _catalogue_parameters(tasks) -> list[OpenApiParameter]:
    return [
        OpenApiParameter("q", OpenApiTypes.STR, description="Words to find in the name, organisation or description."),
        OpenApiParameter("task", OpenApiTypes.STR, enum=[value for value, _label in tasks]),
        OpenApiParameter("licence", OpenApiTypes.STR, description="Exact licence id, e.g. apache-2.0."),
        OpenApiParameter("organisation", OpenApiTypes.STR, description="Exact organisation, e.g. Qwen."),
        OpenApiParameter(
            "size", OpenApiTypes.STR, enum=list(selectors.SIZE_BUCKETS), description="Size on disk bucket."
        ),
        OpenApiParameter("sort", OpenApiTypes.STR, enum=list(selectors.SORTS)),
    ]


class _CatalogueViewSet(viewsets.ReadOnlyModelViewSet):
    filter_form: type[CatalogueFilterForm]

    def get_queryset(self):
        if self.action == "list":
            return self.select(filters=_form_or_400(self.filter_form(self.request.query_params)))
        return self.select()


@extend_schema_view(
    list=extend_schema(summary="List public models", parameters=_catalogue_parameters(ModelTask.choices)),
    retrieve=extend_schema(summary="A public model"),
)
class ModelEntryViewSet(_CatalogueViewSet):
    """Public models the platform mounts read-only under /models."""

    serializer_class = ModelEntrySerializer
    filter_form = ModelFilterForm
    select = staticmethod(selectors.model_entry_list)


@extend_schema_view(
    list=extend_schema(summary="List public datasets", parameters=_catalogue_parameters(DatasetTask.choices)),
    retrieve=extend_schema(summary="A public dataset"),
)
class DatasetEntryViewSet(_CatalogueViewSet):
    """Public datasets the platform mounts read-only under /datasets."""

    serializer_class = DatasetEntrySerializer
    filter_form = DatasetFilterForm
    select = staticmethod(selectors.dataset_entry_list)


@extend_schema_view(
    list=extend_schema(
        summary="List one-click apps",
        parameters=[
            OpenApiParameter("category", OpenApiTypes.STR, enum=[value for value, _label in AppCategory.choices]),
            OpenApiParameter("q", OpenApiTypes.STR),
        ],
    ),
    retrieve=extend_schema(summary="A one-click app"),
)
class AppViewSet(viewsets.ReadOnlyModelViewSet):
    """One-click apps: image, start command, ports, the models they serve and their parameters."""

    serializer_class = AppSerializer
    lookup_field = "slug"

    def get_queryset(self):
        filters = _form_or_400(AppFilterForm(self.request.query_params)) if self.action == "list" else {}
        return selectors.app_list(category=filters.get("category", ""), q=filters.get("q", "")).prefetch_related(
            "served_models", "parameters"
        )

    @extend_schema(
        summary="Fit check: which GPUs and card counts can serve a model, at what price",
        parameters=[
            OpenApiParameter("model", OpenApiTypes.STR, description="Repository id of one of the app's models."),
            OpenApiParameter("precision", OpenApiTypes.STR, enum=list(fit.PRECISIONS)),
            OpenApiParameter(
                "context_length",
                {"type": "integer", "minimum": fit.MIN_CONTEXT_LENGTH},
                description="Tokens; at most the app's own maximum context.",
            ),
            OpenApiParameter("concurrency", {"type": "integer", "minimum": 1, "maximum": fit.MAX_CONCURRENCY}),
        ],
        responses=FitSerializer,
    )
    @action(detail=True, methods=["get"])
    def fit(self, request: Request, slug: str | None = None) -> Response:
        app = selectors.app_get(slug=slug)
        assumptions = {
            "gpu_memory_utilization_percent": fit.GPU_MEMORY_UTILIZATION_PERCENT,
            "image_pull_bytes_per_s": fit.IMAGE_PULL_BYTES_PER_S,
            "weights_load_bytes_per_s": fit.WEIGHTS_LOAD_BYTES_PER_S,
        }
        # A CPU variant (llama.cpp beside vLLM) runs on a host without GPUs and needs no card at all.
        cpu_variant = (
            {"engine": app.cpu_engine, "model": app.cpu_model, "image": app.cpu_image, "cards_needed": 0}
            if app.has_cpu_variant
            else None
        )
        where = {"runs_on": app.runs_on, "cpu_variant": cpu_variant}
        if not app.gpu_required:
            # Tools such as TensorBoard hold no model in GPU memory: every offer fits; say so plainly.
            body = {"app": app.slug, **where, "gpu_required": False, "rows": [], "estimate": None}
            body["assumptions"] = assumptions
            return Response(FitSerializer(body).data)
        data = {**FitForm.initial_for(app), **request.query_params.dict()}
        cleaned = _form_or_400(FitForm(data, app=app))
        form_workload = fit.Workload(
            precision=cleaned["precision"], context_length=cleaned["context_length"], concurrency=cleaned["concurrency"]
        )
        table = selectors.app_fit_table(app=app, model=cleaned["model"], workload=form_workload)
        body = {
            "app": app.slug,
            **where,
            "model": cleaned["model"].repo_id,
            "precision": form_workload.precision,
            "context_length": form_workload.context_length,
            "concurrency": form_workload.concurrency,
            "gpu_required": True,
            "estimate": table.estimate,
            "rows": table.rows,
            "assumptions": assumptions,
        }
        return Response(FitSerializer(body).data)


def _raise(exc: InstanceError):
    if isinstance(exc, services.DeploymentInvalid) and exc.fields:
        raise ValidationError(exc.fields) from exc
    _raise_instance_error(exc)


_action_response = {200: DeploymentSerializer, 409: OpenApiResponse(description=_("Not allowed in this state"))}


_key_response = inline_serializer("DeploymentApiKey", {"api_key": serializers.CharField()})


@resource_schema(
    tag="deployments",
    noun="deployment",
    nouns="deployments",
    create={
        "summary": "Deploy an app",
        "request": DeploySerializer,
        "responses": {
            201: DeploymentCreatedSerializer,
            400: OpenApiResponse(description=_("Invalid choice, or the model does not fit")),
            409: LAUNCH_REFUSED,
        },
    },
    destroy={"summary": "Delete (releases the instance)", "responses": {204: None, 409: None}},
)
class DeploymentViewSet(mixins.DestroyModelMixin, TeamResourceViewSet):
    serializer_class = DeploymentSerializer
    change_refused = _("Only the deployment's creator or a team admin can change it.")

    def resources_for(self, principal):
        return selectors.deployment_list_for(user=principal)

    @idempotent(secret_fields=("api_key",))
    def create(self, request, *args, **kwargs):
        require_permission(
            request, Permission.RESOURCES_LAUNCH, _("Your role in this team does not allow deploying apps.")
        )
        body = DeploySerializer(data=request.data, context=self.get_serializer_context())
        body.is_valid(raise_exception=True)
        data = body.validated_data
        data["volumes"] = [(v["volume"], v["mount_path"], v["mode"]) for v in data.pop("volumes", [])]
        data.setdefault("model", data["app"].default_model)  # left out: the app's default model
        try:
            deployment, key = services.deployment_create(user=request_acting(request)[0], actor=request.user, **data)
        except InstanceError as exc:
            _raise(exc)
        deployment.api_key = key
        data = DeploymentCreatedSerializer(deployment, context=self.get_serializer_context()).data
        return Response(data, status=status.HTTP_201_CREATED)

    def destroy(self, request, *args, **kwargs):
        try:
            services.deployment_delete(deployment=self.get_object(operate=True), actor=request.user)
        except InstanceError as exc:
            _raise(exc)
        return Response(status=status.HTTP_204_NO_CONTENT)

    def _act(self, verb, **kwargs):
        deployment = self.get_object(operate=True)
        try:
            deployment = verb(deployment=deployment, **kwargs)
        except InstanceError as exc:
            _raise(exc)
        return Response(DeploymentSerializer(deployment, context=self.get_serializer_context()).data)

    @extend_schema(
        summary="Stop (GPUs freed, disk kept)", tags=["deployments"], request=None, responses=_action_response
    )
    @action(detail=True, methods=["post"])
    def stop(self, request, pk=None):
        return self._act(services.deployment_stop)

    @extend_schema(summary="Start a stopped deployment", tags=["deployments"], request=None, responses=_action_response)
    @action(detail=True, methods=["post"])
    def start(self, request, pk=None):
        return self._act(services.deployment_start)

    @extend_schema(summary="Restart in place", tags=["deployments"], request=None, responses=_action_response)
    @action(detail=True, methods=["post"])
    def restart(self, request, pk=None):
        return self._act(services.deployment_restart)

    @extend_schema(
        summary="Redeploy with another model or parameters (restarts in place)",
        tags=["deployments"],
        request=RedeploySerializer,
        responses={**_action_response, 400: OpenApiResponse(description=_("Invalid, or does not fit"))},
    )
    @action(detail=True, methods=["post"])
    def redeploy(self, request, pk=None):
        body = RedeploySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        deployment = self.get_object(operate=True)
        model = body.validated_data.get("model", deployment.model)
        return self._act(services.deployment_redeploy, model=model, parameters=body.validated_data["parameters"])

    @extend_schema(
        summary="Make a new API key (the old one stops working)",
        tags=["deployments"],
        request=None,
        responses={200: _key_response},
    )
    @action(detail=True, methods=["post"], url_path="regenerate-key")
    def regenerate_key(self, request, pk=None):
        key = services.deployment_key_regenerate(deployment=self.get_object(operate=True))
        return Response({"api_key": key})
