from django.contrib import admin

from instances.models import (
    GpuModel,
    GpuQuota,
    Image,
    Instance,
    InstanceEvent,
    Node,
    QuotaAudit,
    QuotaRequest,
    Region,
    Reservation,
    ReservationEvent,
    StrayMachine,
)


@admin.register(Region)
class RegionAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "backend_alias", "is_active"]


@admin.register(GpuModel)
class GpuModelAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "memory_gb", "price_per_card_hour_fen", "is_active"]


@admin.register(Image)
class ImageAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "framework", "cuda_version", "is_active"]


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "region", "gpu_model", "total_cards", "free_cards", "is_healthy", "last_seen_at"]
    list_filter = ["region", "gpu_model", "is_healthy"]


class InstanceEventInline(admin.TabularInline):
    model = InstanceEvent
    extra = 0
    readonly_fields = ["old", "new", "reason", "created_at"]
    can_delete = False


@admin.register(Instance)
class InstanceAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "status", "gpu_model", "gpu_count", "region", "node", "created_at"]
    list_filter = ["status", "gpu_model", "region"]
    search_fields = ["id", "name", "owner__email"]
    readonly_fields = [
        "status",
        "status_reason",
        "backend_state",
        "node",
        "status_changed_at",
        "running_since",
        "entry_points",
        "entry_points_at",
    ]
    inlines = [InstanceEventInline]
    list_select_related = ["owner", "gpu_model", "region", "node"]


@admin.register(StrayMachine)
class StrayMachineAdmin(admin.ModelAdmin):
    """Machines a backend has that no instance owns: for staff to investigate (never billed)."""

    list_display = ["key", "backend_alias", "detail", "first_seen_at", "last_seen_at", "resolved_at"]
    list_filter = ["backend_alias", "resolved_at"]


@admin.register(GpuQuota)
class GpuQuotaAdmin(admin.ModelAdmin):
    list_display = ["user", "gpu_model", "cards"]
    search_fields = ["user__email"]


class QuotaAuditInline(admin.TabularInline):
    model = QuotaAudit
    extra = 0
    readonly_fields = ["actor", "action", "detail", "created_at"]
    can_delete = False


@admin.register(QuotaRequest)
class QuotaRequestAdmin(admin.ModelAdmin):
    list_display = ["user", "gpu_model", "cards", "status", "granted_cards", "expires_at", "decided_by"]
    list_filter = ["status", "gpu_model"]
    inlines = [QuotaAuditInline]


class ReservationEventInline(admin.TabularInline):
    model = ReservationEvent
    extra = 0
    readonly_fields = ["actor", "action", "detail", "created_at"]
    can_delete = False


@admin.register(Reservation)
class ReservationAdmin(admin.ModelAdmin):
    """Read-only here: reservations are granted and cancelled on the staff page (or the staff API), through
    the services that check capacity and record the events."""

    list_display = ["account", "region", "gpu_model", "cards", "starts_at", "ends_at", "status", "created_by"]
    list_filter = ["status", "region", "gpu_model"]
    search_fields = ["account__email"]
    inlines = [ReservationEventInline]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
