"""Read-only representations of the catalogues and the fit check for the REST API."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import (
    extend_schema_field,
)
from rest_framework import serializers

from apps_marketplace import selectors
from apps_marketplace.models import App, AppParameter, DatasetEntry, Deployment, ModelEntry
from core.drf import SlugRelatedField
from instances.models import GpuModel, Instance, Region
from instances.serializers import LaunchVolumeSerializer


class ModelEntrySerializer(serializers.ModelSerializer):
    source_url = serializers.CharField(read_only=True)

    class Meta:
        model = ModelEntry
        fields = [
            "id",
            "repo_id",
            "name",
            "organisation",
            "task",
            "parameter_count",
            "size_bytes",
            "licence",
            "source",
            "source_url",
            "revision",
            "description",
            "mount_path",
            "num_layers",
            "hidden_size",
            "num_attention_heads",
            "num_kv_heads",
            "head_dim",
            "max_context_length",
        ]


class DatasetEntrySerializer(serializers.ModelSerializer):
    source_url = serializers.CharField(read_only=True)

    class Meta:
        model = DatasetEntry
        fields = [
            "id",
            "repo_id",
            "name",
            "organisation",
            "task",
            "num_rows",
            "size_bytes",
            "licence",
            "source",
            "source_url",
            "revision",
            "description",
            "mount_path",
        ]


class AppParameterSerializer(serializers.ModelSerializer):
    class Meta:
        model = AppParameter
        fields = ["key", "label", "kind", "default", "choices", "min_value", "max_value", "help_text"]


class AppSerializer(serializers.ModelSerializer):
    default_model = serializers.SlugRelatedField(slug_field="repo_id", read_only=True, allow_null=True)
    models = serializers.SlugRelatedField(source="served_models", slug_field="repo_id", many=True, read_only=True)
    parameters = AppParameterSerializer(many=True, read_only=True)
    precisions = serializers.ListField(child=serializers.CharField(), read_only=True)
    webui_port = serializers.IntegerField(source="effective_webui_port", read_only=True)
    runs_on = serializers.CharField(read_only=True)

    class Meta:
        model = App
        fields = [
            "slug",
            "name",
            "tagline",
            "description",
            "category",
            "engine",
            "image",
            "image_size_bytes",
            "command_template",
            "port",
            "webui_image",
            "webui_command_template",
            "webui_port",
            "webui_path",
            "openai_compatible",
            "api_path",
            "gpu_required",
            "runs_on",
            "cpu_image",
            "cpu_engine",
            "cpu_model",
            "supports_tensor_parallel",
            "precisions",
            "default_model",
            "models",
            "parameters",
            "recommended_gpu_slug",
            "recommended_gpu_count",
            "model_recommendations",
            "docs_url",
        ]


class FitEstimateSerializer(serializers.Serializer):
    weights_bytes = serializers.IntegerField(source="weights")
    kv_cache_bytes = serializers.IntegerField(source="kv_cache")
    activation_bytes = serializers.IntegerField(source="activations")
    runtime_bytes_per_card = serializers.IntegerField(source="runtime_per_card")
    total_bytes = serializers.IntegerField(source="total")


class FitRowSerializer(serializers.Serializer):
    gpu = serializers.CharField(source="gpu.slug")
    gpu_name = serializers.CharField(source="gpu.name")
    memory_gb = serializers.IntegerField(source="gpu.memory_gb")
    cards = serializers.IntegerField()
    fits = serializers.BooleanField()
    need_per_card_bytes = serializers.IntegerField(source="need_per_card")
    usable_per_card_bytes = serializers.IntegerField(source="usable_per_card")
    price_per_hour_fen = serializers.IntegerField()
    ready_seconds = serializers.IntegerField()
    reason = serializers.CharField()
    cheapest = serializers.BooleanField(source="is_cheapest")
    recommended = serializers.BooleanField(source="is_recommended")


class CpuVariantSerializer(serializers.Serializer):
    """The app's CPU variant: what runs on a host without GPUs, needing no card."""

    engine = serializers.CharField()
    model = serializers.CharField()
    image = serializers.CharField()
    cards_needed = serializers.IntegerField()


class FitSerializer(serializers.Serializer):
    app = serializers.CharField()
    runs_on = serializers.CharField()
    cpu_variant = CpuVariantSerializer(allow_null=True)
    model = serializers.CharField(required=False)
    precision = serializers.CharField(required=False)
    context_length = serializers.IntegerField(required=False)
    concurrency = serializers.IntegerField(required=False)
    gpu_required = serializers.BooleanField()
    estimate = FitEstimateSerializer(allow_null=True)
    rows = FitRowSerializer(many=True)
    assumptions = serializers.DictField(child=serializers.IntegerField())


class StepSerializer(serializers.Serializer):
    code = serializers.CharField()
    label = serializers.CharField()
    state = serializers.ChoiceField(choices=["done", "current", "todo"])


class DeploymentSerializer(serializers.ModelSerializer):
    app = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    model = serializers.SlugRelatedField(slug_field="repo_id", read_only=True, allow_null=True)
    instance = serializers.UUIDField(source="instance_id", read_only=True)
    instance_status = serializers.CharField(source="instance.status", read_only=True)
    region = serializers.CharField(source="instance.region.slug", read_only=True)
    gpu_model = serializers.CharField(source="instance.gpu_model.slug", read_only=True)
    gpu_count = serializers.IntegerField(source="instance.gpu_count", read_only=True)
    hourly_price_fen = serializers.IntegerField(source="instance.hourly_price_fen", read_only=True)
    status = serializers.SerializerMethodField()
    status_display = serializers.SerializerMethodField()
    # Why it is in its status (why it failed, above all), in the request's language.
    status_reason = serializers.CharField(source="instance.status_reason_text", read_only=True)
    steps = serializers.SerializerMethodField()
    serving = serializers.SerializerMethodField()
    webui_url = serializers.SerializerMethodField()
    api_base_url = serializers.SerializerMethodField()

    class Meta:
        model = Deployment
        fields = [
            "id",
            "app",
            "model",
            "parameters",
            "instance",
            "instance_status",
            "region",
            "gpu_model",
            "gpu_count",
            "hourly_price_fen",
            "status",
            "status_display",
            "status_reason",
            "steps",
            "serving",
            "webui_url",
            "api_base_url",
            "api_key_prefix",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def _status(self, obj: Deployment):
        return selectors.deployment_status(deployment=obj)

    def _endpoints(self, obj: Deployment) -> dict:
        request = self.context.get("request")
        return selectors.deployment_endpoints(
            deployment=obj, host=request.get_host() if request else "", scheme=request.scheme if request else "https"
        )

    def get_status(self, obj: Deployment) -> str:
        return self._status(obj).code

    def get_status_display(self, obj: Deployment) -> str:
        return self._status(obj).label

    @extend_schema_field(StepSerializer(many=True))
    def get_steps(self, obj: Deployment) -> list[dict]:
        return [{**step, "label": str(step["label"])} for step in self._status(obj).steps]

    def get_serving(self, obj: Deployment) -> bool:
        return self._endpoints(obj)["serving"]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_webui_url(self, obj: Deployment) -> str | None:
        return self._endpoints(obj)["webui_url"]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_api_base_url(self, obj: Deployment) -> str | None:
        return self._endpoints(obj)["api_base_url"]


class DeploymentCreatedSerializer(DeploymentSerializer):
    api_key = serializers.CharField(
        read_only=True,
        allow_null=True,
        help_text=_(
            "Shown once; only its SHA-256 is kept. Null when the answer is an Idempotency-Key replay: "
            "make a new key with regenerate-key if the first answer was lost."
        ),
    )

    class Meta(DeploymentSerializer.Meta):
        fields = [*DeploymentSerializer.Meta.fields, "api_key"]
        read_only_fields = fields


class DeploySerializer(serializers.Serializer):
    app = SlugRelatedField(slug_field="slug", queryset=App.objects.filter(is_active=True))
    model = SlugRelatedField(
        slug_field="repo_id", queryset=ModelEntry.objects.filter(is_active=True), required=False, allow_null=True
    )
    parameters = serializers.DictField(required=False, default=dict)
    region = SlugRelatedField(slug_field="slug", queryset=Region.objects.filter(is_active=True))
    gpu_model = SlugRelatedField(slug_field="slug", queryset=GpuModel.objects.filter(is_active=True))
    gpu_count = serializers.ChoiceField(choices=Instance.GPU_COUNTS)
    volumes = LaunchVolumeSerializer(
        many=True, required=False, help_text="Volumes mounted into the app's instance (training output, a model)."
    )


class RedeploySerializer(serializers.Serializer):
    model = SlugRelatedField(
        slug_field="repo_id", queryset=ModelEntry.objects.filter(is_active=True), required=False, allow_null=True
    )
    parameters = serializers.DictField(required=False, default=dict)
