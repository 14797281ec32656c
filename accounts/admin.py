"""Staff find people and their credentials in the admin: users, SSH keys, API tokens, security logs.

Keys and tokens are read-only here: they are made by ``accounts.services`` (which parses and
fingerprints keys, and shows a token's secret once), so the admin can look them up, delete a key and
revoke a token, never write one. A token's secret is never stored; its digest is not shown either.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.contrib.auth.forms import AdminUserCreationForm, UserChangeForm
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from accounts.models import APIToken, SecurityEvent, SSHKey, User
from accounts.services import api_token_revoke, ssh_key_delete


class UserCreationForm(AdminUserCreationForm):
    class Meta:
        model = User
        fields = ("email",)

    def clean_email(self) -> str:
        # As UserManager stores it: the login is matched case-insensitively.
        return User.objects.normalize_email(self.cleaned_data["email"]).lower()


class UserEditForm(UserChangeForm):
    class Meta:
        model = User
        fields = "__all__"


@admin.register(User)
class UserAdmin(DjangoUserAdmin):
    """Django's user admin, for a user whose e-mail address is the login (there is no user name)."""

    form = UserEditForm
    add_form = UserCreationForm
    fieldsets = (
        (None, {"fields": ("email", "password")}),
        (_("Personal info"), {"fields": ("display_name",)}),
        (_("Permissions"), {"fields": ("is_active", "is_staff", "is_superuser", "groups", "user_permissions")}),
        (_("API"), {"fields": ("api_rate_per_min",)}),
        (_("Important dates"), {"fields": ("last_login", "date_joined")}),
    )
    add_fieldsets = ((None, {"classes": ("wide",), "fields": ("email", "usable_password", "password1", "password2")}),)
    list_display = ("email", "display_name", "is_active", "is_staff", "date_joined", "last_login")
    list_filter = ("is_staff", "is_superuser", "is_active")
    search_fields = ("email", "display_name")
    ordering = ("email",)
    readonly_fields = ("last_login", "date_joined")

    def get_readonly_fields(self, request, obj=None):
        # The address is also allauth's verified EmailAddress row: users change it from their account
        # page, which verifies the new one; an edit here would leave the two apart.
        return (*self.readonly_fields, "email") if obj is not None else self.readonly_fields


class ReadOnlyCredentialAdmin(admin.ModelAdmin):
    """Looked up and deleted or revoked here, never written: the services make them."""

    list_select_related = ("user",)
    date_hierarchy = "created_at"

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        # Viewing only: the change page shows the fields read-only.
        return False


@admin.register(SSHKey)
class SSHKeyAdmin(ReadOnlyCredentialAdmin):
    list_display = ("name", "user", "key_type", "bits", "fingerprint", "created_at")
    list_filter = ("key_type",)
    search_fields = ("name", "fingerprint", "user__email")

    # Through the service, so that the user's security log shows the removal (marked as staff's).
    def delete_model(self, request, obj: SSHKey) -> None:
        ssh_key_delete(user=obj.user, key_id=obj.pk, by_staff=True)

    def delete_queryset(self, request, queryset) -> None:
        for key in queryset.select_related("user"):
            ssh_key_delete(user=key.user, key_id=key.pk, by_staff=True)


class APITokenStatusFilter(admin.SimpleListFilter):
    title = _("status")
    parameter_name = "status"

    def lookups(self, request, model_admin):
        return APIToken.Status.choices

    def queryset(self, request, queryset):
        now = timezone.now()
        live = Q(revoked_at__isnull=True)
        if self.value() == APIToken.Status.ACTIVE:
            return queryset.filter(live & (Q(expires_at__isnull=True) | Q(expires_at__gt=now)))
        if self.value() == APIToken.Status.EXPIRED:
            return queryset.filter(live & Q(expires_at__lte=now))
        if self.value() == APIToken.Status.REVOKED:
            return queryset.filter(revoked_at__isnull=False)
        return queryset


@admin.register(APIToken)
class APITokenAdmin(ReadOnlyCredentialAdmin):
    # ``digest`` is left out everywhere: it is not the secret, but nothing staff do needs it.
    fields = (
        "name",
        "user",
        "team",
        "prefix",
        "scope",
        "status_now",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
    )
    readonly_fields = fields
    list_display = (
        "name",
        "user",
        "team",
        "prefix",
        "scope",
        "status_now",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
    )
    list_filter = (APITokenStatusFilter, "scope")
    search_fields = ("name", "prefix", "user__email")
    actions = ("revoke",)

    @admin.display(description=_("status"))
    def status_now(self, token: APIToken) -> str:
        return token.status_now.label

    def has_delete_permission(self, request, obj=None) -> bool:
        # Revoke instead: the row records when the token was last used and when it stopped working.
        return False

    def has_revoke_permission(self, request) -> bool:
        return request.user.is_staff and request.user.has_perm("accounts.change_apitoken")

    @admin.action(description=_("Revoke the selected tokens"), permissions=["revoke"])
    def revoke(self, request, queryset) -> None:
        revoked = sum(api_token_revoke(token=token, by_staff=True) for token in queryset)
        self.message_user(
            request,
            ngettext("%(n)d token revoked.", "%(n)d tokens revoked.", revoked) % {"n": revoked},
            messages.SUCCESS,
        )


@admin.register(SecurityEvent)
class SecurityEventAdmin(admin.ModelAdmin):
    """Users' security logs, for staff answering "was that me?": read-only, as the table is append-only."""

    list_display = ("created_at", "user", "action", "ip", "device")
    list_filter = ("action",)
    list_select_related = ("user",)
    search_fields = ("user__email", "=ip")
    date_hierarchy = "created_at"
    fields = ("created_at", "user", "action", "ip", "user_agent", "details")
    readonly_fields = fields

    @admin.display(description=_("device"))
    def device(self, event: SecurityEvent) -> str:
        return event.device

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
