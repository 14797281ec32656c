from django.contrib import admin

from gateway.models import GatewaySession


@admin.register(GatewaySession)
class GatewaySessionAdmin(admin.ModelAdmin):
    """Read-only: the log is written by the gateway process alone."""

    list_display = ("started_at", "user", "instance", "login", "peer", "outcome", "ended_at")
    list_filter = ("outcome",)
    search_fields = ("login", "peer", "key_fingerprint", "user__email")
    readonly_fields = [f.name for f in GatewaySession._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
