"""Who hears about a team's account (``notifications.hooks.recipients``).

A team's account has an address that reaches no one (``@teams.invalid``), so the console's news about
it goes to people: its owners and admins, who run its machines, quota and money, and for news about
money also its billing viewers. News about one machine (preempted, recovered, idle warning and stop, a
deployment ready or failed) also goes to the member who launched it (``actor``): it is their work that
stops, and a member may not be an admin. Only while they are still in the team with a role that sees
its resources: a removed member, or one made a billing viewer, hears no more about the team's machines.
A personal account hears about itself. Each person gets it in their own language and by the channels
they chose.
"""

from __future__ import annotations

from notifications.models import Kind
from teams.models import Membership, Role
from teams.roles import Permission, role_can

MONEY_KINDS = frozenset({Kind.LOW_BALANCE, Kind.OUT_OF_FUNDS, Kind.BUDGET_THRESHOLD, Kind.BUDGET_REACHED})


def team_notification_recipients(*, user, kind: str, actor=None) -> list:
    """The people told about ``user``'s account: itself, or a team's owners and admins (and billing
    viewers for news about money), and ``actor`` while a member who may see the team's resources."""
    if getattr(user, "team", None) is None:
        return [user]
    roles = [Role.OWNER, Role.ADMIN, *([Role.BILLING] if kind in MONEY_KINDS else [])]
    members = (
        Membership.objects.filter(team__account=user, team__deleted_at__isnull=True, user__is_active=True)
        .filter(role__in=roles)
        .select_related("user")
        .order_by("created_at", "id")
    )
    people = [membership.user for membership in members]
    if actor is not None and all(person.pk != actor.pk for person in people):
        launcher = Membership.objects.filter(
            team__account=user, team__deleted_at__isnull=True, user=actor, user__is_active=True
        ).first()
        if launcher is not None and role_can(launcher.role, Permission.RESOURCES_VIEW):
            people.append(actor)
    return people
