"""Who hears about a team's account (``NOTIFICATIONS_RECIPIENTS_HOOK``).

A team's account has an address that reaches no one (``@teams.invalid``), so the console's news about
it goes to people: its owners and admins, who run its machines, quota and money, and for news about
money also its billing viewers. A personal account hears about itself. Each person gets it in their
own language and by the channels they chose.
"""

from __future__ import annotations

from notifications.models import Kind
from teams.models import Membership, Role

MONEY_KINDS = frozenset({Kind.LOW_BALANCE, Kind.OUT_OF_FUNDS, Kind.BUDGET_THRESHOLD, Kind.BUDGET_REACHED})


def team_notification_recipients(*, user, kind: str) -> list:
    """The people told about ``user``'s account: itself, or a team's owners and admins (and billing
    viewers for news about money)."""
    if getattr(user, "team", None) is None:
        return [user]
    roles = [Role.OWNER, Role.ADMIN, *([Role.BILLING] if kind in MONEY_KINDS else [])]
    members = (
        Membership.objects.filter(
            team__account=user, team__deleted_at__isnull=True, role__in=roles, user__is_active=True
        )
        .select_related("user")
        .order_by("created_at", "id")
    )
    return [membership.user for membership in members]
