from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from core.formatting import cny
from teams.models import Invitation, Membership, Team, TeamEvent
from teams.selectors import teams_for_staff


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    raw_id_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "account", "created_by", "members", "balance", "created_at", "deleted_at"]
    search_fields = ["name", "slug", "account__email"]
    raw_id_fields = ["account", "created_by"]
    inlines = [MembershipInline]

    def get_queryset(self, request):
        return teams_for_staff().select_related("account")

    @admin.display(description=_("members"), ordering="members")
    def members(self, team: Team) -> int:
        return team.members

    @admin.display(description=_("balance"), ordering="balance_fen")
    def balance(self, team: Team) -> str:
        return cny(team.balance_fen)


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    list_display = ["email", "team", "role", "status", "created_at", "expires_at"]
    list_filter = ["status", "role"]
    search_fields = ["email", "team__name"]
    exclude = ["digest"]
    raw_id_fields = ["team", "invited_by", "accepted_by"]


@admin.register(TeamEvent)
class TeamEventAdmin(admin.ModelAdmin):
    """Read-only: the audit log is append-only."""

    list_display = ["created_at", "team", "actor", "action", "target"]
    list_filter = ["action"]
    search_fields = ["team__name", "target"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
