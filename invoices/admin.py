from django.contrib import admin

from invoices.models import InvoiceRequest


@admin.register(InvoiceRequest)
class InvoiceRequestAdmin(admin.ModelAdmin):
    """Read-only: requests are decided on /staff/invoices/, where the rules (never twice) are kept."""

    list_display = ("id", "created_at", "user", "kind", "amount_fen", "title", "status", "invoice_number")
    list_filter = ("status", "kind", "title_type")
    search_fields = ("user__email", "title", "tax_number", "invoice_number")
    exclude = ("pdf",)

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
