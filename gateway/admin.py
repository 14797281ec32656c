from django.contrib import admin

from gateway.models import GatewaySession, InstanceHostKey


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


@admin.register(InstanceHostKey)
class InstanceHostKeyAdmin(admin.ModelAdmin):
    """The pinned host keys: read-only, but deletable, so that staff can trust a rebuilt machine's new key
    (the next connection pins it)."""

    list_display = ("instance", "fingerprint", "pinned_at")
    search_fields = ("instance__id", "instance__name", "fingerprint")
    readonly_fields = [f.name for f in InstanceHostKey._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
