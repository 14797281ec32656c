from django.contrib import admin

from storage.models import Volume, VolumeAttachment, VolumeEvent


class AttachmentInline(admin.TabularInline):
    model = VolumeAttachment
    extra = 0
    raw_id_fields = ("instance",)
    readonly_fields = ("created_at", "detach_requested_at")


class EventInline(admin.TabularInline):
    model = VolumeEvent
    extra = 0
    readonly_fields = ("old", "new", "reason", "created_at")
    can_delete = False


@admin.register(Volume)
class VolumeAdmin(admin.ModelAdmin):
    """Read-mostly: volumes change through the storage services, never by editing rows here."""

    list_display = ("name", "owner", "region", "size_gb", "status", "used_bytes", "created_at")
    list_filter = ("status", "region")
    search_fields = ("name", "owner__email", "id")
    readonly_fields = [f.name for f in Volume._meta.fields]
    inlines = [AttachmentInline, EventInline]
