"""The admin shows the ledger but cannot change it: corrections are staff adjustments (a new
transaction with a reason, on /staff/billing/), never edits of history."""

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from billing.models import BalanceAlert, Entry, LedgerAccount, LedgerCheckRun, Meter, Sku, TopUpOrder, Transaction
from core.formatting import cny


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class EntryInline(admin.TabularInline):
    model = Entry
    fields = ("account", "amount")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Transaction)
class TransactionAdmin(ReadOnlyAdmin):
    list_display = ("id", "created_at", "kind", "user", "description", "created_by", "idempotency_key")
    list_filter = ("kind",)
    search_fields = ("idempotency_key", "user__email", "description")
    list_select_related = ("user", "created_by")
    inlines = [EntryInline]
    date_hierarchy = "created_at"


@admin.register(Entry)
class EntryAdmin(ReadOnlyAdmin):
    list_display = ("id", "transaction", "account", "amount")
    list_select_related = ("transaction", "account__owner")
    search_fields = ("transaction__idempotency_key", "account__owner__email")


@admin.register(LedgerAccount)
class LedgerAccountAdmin(admin.ModelAdmin):
    """Accounts are created by the services; the balance is a cache of the entries and never edited."""

    list_display = ("id", "kind", "owner", "balance", "floor", "currency")
    list_filter = ("kind",)
    search_fields = ("owner__email",)
    list_select_related = ("owner",)
    # The floor too: lowering it grants credit, which deserves a reviewed change, not a form field.
    readonly_fields = ("kind", "owner", "currency", "balance", "floor", "created_at")

    def has_add_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Sku)
class SkuAdmin(admin.ModelAdmin):
    list_display = ("code", "name", "unit", "price_fen", "unit_seconds", "is_storage", "updated_at")
    search_fields = ("code", "name")


@admin.register(Meter)
class MeterAdmin(ReadOnlyAdmin):
    list_display = ("id", "user", "ref", "sku", "quantity", "started_at", "stopped_at", "owed_fen", "charged_fen")
    list_filter = ("sku",)
    search_fields = ("ref", "user__email")
    list_select_related = ("user", "sku")


@admin.register(LedgerCheckRun)
class LedgerCheckRunAdmin(ReadOnlyAdmin):
    list_display = ("checked_at", "ok", "accounts_checked", "transactions_checked", "entries_total", "duration_ms")


@admin.register(BalanceAlert)
class BalanceAlertAdmin(ReadOnlyAdmin):
    list_display = ("user", "kind", "started_at", "notified_at", "resolved_at", "runway_s")
    list_filter = ("kind",)
    search_fields = ("user__email",)


@admin.register(TopUpOrder)
class TopUpOrderAdmin(ReadOnlyAdmin):
    """Orders move only through billing.payments (webhooks, expiry, refunds on /staff/billing/)."""

    list_display = ("id", "user", "amount", "status", "gateway", "gateway_reference", "created_at", "paid_at")
    list_filter = ("status", "gateway")
    # "=id": staff paste an order number; the e-mail and the gateway's reference find the rest.
    search_fields = ("=id", "user__email", "gateway_reference")
    list_select_related = ("user",)
    date_hierarchy = "created_at"

    @admin.display(description=_("amount"), ordering="amount_fen")
    def amount(self, order: TopUpOrder) -> str:
        return cny(order.amount_fen)
