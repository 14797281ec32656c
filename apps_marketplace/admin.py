from django.contrib import admin
from django.template.defaultfilters import filesizeformat
from django.utils.translation import gettext_lazy as _

from apps_marketplace.models import App, AppParameter, DatasetEntry, Deployment, ModelEntry


@admin.display(description=_("size"), ordering="size_bytes")
def size_display(obj) -> str:
    return filesizeformat(obj.size_bytes)


@admin.register(ModelEntry)
class ModelEntryAdmin(admin.ModelAdmin):
    list_display = ["repo_id", "task", "parameters_display", size_display, "licence", "source", "is_active"]
    list_filter = ["task", "source", "is_active", "licence", "organisation"]
    search_fields = ["repo_id", "name", "organisation", "description"]
    list_editable = ["is_active"]
    list_per_page = 50
    readonly_fields = ["created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["repo_id", "name", "organisation", "task", "description", "is_active"]}),
        (_("Source and storage"), {"fields": ["source", "revision", "licence", "size_bytes", "mount_path"]}),
        (
            _("Architecture (for the fit check)"),
            {
                "fields": [
                    "parameter_count",
                    "num_layers",
                    "hidden_size",
                    "num_attention_heads",
                    "num_kv_heads",
                    "head_dim",
                    "max_context_length",
                ]
            },
        ),
        (_("History"), {"fields": ["created_at", "updated_at"]}),
    ]

    @admin.display(description=_("parameters"), ordering="parameter_count")
    def parameters_display(self, obj) -> str:
        if not obj.parameter_count:
            return "—"
        return (
            f"{obj.parameter_count / 1e9:.2f}B" if obj.parameter_count >= 1e9 else f"{obj.parameter_count / 1e6:.0f}M"
        )


@admin.register(DatasetEntry)
class DatasetEntryAdmin(admin.ModelAdmin):
    list_display = ["repo_id", "task", "num_rows", size_display, "licence", "source", "is_active"]
    list_filter = ["task", "source", "is_active", "licence", "organisation"]
    search_fields = ["repo_id", "name", "organisation", "description"]
    list_editable = ["is_active"]
    list_per_page = 50
    readonly_fields = ["created_at", "updated_at"]


class AppParameterInline(admin.TabularInline):
    model = AppParameter
    extra = 0


@admin.register(App)
class AppAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "category", "engine", "openai_compatible", "recommended_gpu_slug", "is_active"]
    list_filter = ["category", "openai_compatible", "gpu_required", "is_active"]
    search_fields = ["name", "slug", "description", "image"]
    prepopulated_fields = {"slug": ["name"]}
    autocomplete_fields = ["default_model"]
    filter_horizontal = ["served_models"]
    inlines = [AppParameterInline]


@admin.register(Deployment)
class DeploymentAdmin(admin.ModelAdmin):
    """Read-only: deployments change through apps_marketplace.services (and their instance's services)."""

    list_display = ["app", "model", "owner", "instance", "api_key_prefix", "created_at"]
    list_filter = ["app"]
    search_fields = ["owner__email", "app__name", "model__repo_id"]
    list_select_related = ["app", "model", "owner", "instance"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
