"""Staff look up numbers and real-name verdicts in the admin, read-only: identity's services write them
(a number only after its code, a verdict only from the provider or the staff review page)."""

from __future__ import annotations

from django.contrib import admin

from identity.models import PhoneNumber, RealNameVerification


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(PhoneNumber)
class PhoneNumberAdmin(ReadOnlyAdmin):
    list_display = ("masked", "user", "verified_at")
    search_fields = ("user__email", "number")
    raw_id_fields = ("user",)


@admin.register(RealNameVerification)
class RealNameVerificationAdmin(ReadOnlyAdmin):
    list_display = ("user", "kind", "status", "masked_name", "provider", "provider_reference", "decided_at")
    list_filter = ("kind", "status", "provider")
    search_fields = ("user__email", "provider_reference", "credit_code")
    exclude = ("person_key", "document")
