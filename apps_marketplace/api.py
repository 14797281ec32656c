"""REST endpoints: the app catalogue with its fit check, and the public model and dataset catalogues."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import exceptions, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from apps_marketplace import fit, selectors
from apps_marketplace.forms import (
    AppFilterForm,
    CatalogueFilterForm,
    DatasetFilterForm,
    FitForm,
    ModelFilterForm,
)
from apps_marketplace.models import AppCategory, DatasetTask, ModelTask
from apps_marketplace.serializers import AppSerializer, DatasetEntrySerializer, FitSerializer, ModelEntrySerializer


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
