"""Read-only representations of the catalogues and the fit check for the REST API."""

from __future__ import annotations

from rest_framework import serializers

from apps_marketplace.models import App, AppParameter, DatasetEntry, ModelEntry


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
