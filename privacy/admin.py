"""The admin: legal text versions (drafts editable, published ones read-only), and read-only records."""

from __future__ import annotations

from django.contrib import admin

from privacy.models import Acceptance, DataExport, DeletionRequest, DocumentVersion


@admin.register(DocumentVersion)
class DocumentVersionAdmin(admin.ModelAdmin):
    list_display = ("kind", "version", "title_en", "published_at")
    list_filter = ("kind",)
    readonly_fields = ("published_at", "published_by", "created_by", "created_at")

    def get_readonly_fields(self, request, obj=None):
        # What users accepted stays as they read it: publish from the staff page, edit only drafts.
        if obj is not None and obj.published_at is not None:
            return [f.name for f in self.model._meta.fields]
        return self.readonly_fields


@admin.register(Acceptance)
class AcceptanceAdmin(admin.ModelAdmin):
    list_display = ("user", "document", "accepted_at", "ip")
    raw_id_fields = ("user",)

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(DeletionRequest)
class DeletionRequestAdmin(admin.ModelAdmin):
    list_display = ("pk", "user", "status", "requested_at", "due_at", "completed_at")
    list_filter = ("status",)

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(DataExport)
class DataExportAdmin(admin.ModelAdmin):
    list_display = ("pk", "user", "status", "size_bytes", "created_at", "expires_at")
    exclude = ("content",)

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_add_permission(self, request) -> bool:
        return False
