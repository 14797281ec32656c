"""Reads for teams. Every read is scoped to the person asking: a team they are not in is not found."""

from __future__ import annotations

from dataclasses import dataclass

from allauth.account.models import EmailAddress
from django.db.models import Count, F, OuterRef, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce

from billing.models import LedgerAccount
from billing.selectors import balance_get
from teams.models import Invitation, Membership, Team, TeamEvent

# Statuses of the resource apps' rows that hold nothing any more, named as strings: teams sits below
# instances and storage, so it asks through the account's relations without importing those apps.
_INSTANCE_DONE = ("released", "failed", "lost")
_VOLUME_DONE = ("deleted", "failed")


def memberships_for(*, user) -> QuerySet[Membership]:
    """The user's memberships of live teams, with the team and its account (for the switcher)."""
    return (
        Membership.objects.filter(user=user, team__deleted_at__isnull=True)
        .select_related("team", "team__account")
        .order_by("team__name", "team_id")
    )


def membership_get(*, user, slug: str) -> Membership | None:
    """The user's membership of the live team ``slug``; ``None`` when there is none (a 404 to them)."""
    if not getattr(user, "is_authenticated", False):
        return None
    return memberships_for(user=user).filter(team__slug=slug).first()


def membership_for_team_id(*, user, team_id) -> Membership | None:
    """The acting-context check: one query, the membership with its team and the team's account."""
    try:
        team_id = int(team_id)
    except (TypeError, ValueError):
        return None
    return memberships_for(user=user).filter(team_id=team_id).first()


def team_members(*, team: Team) -> QuerySet[Membership]:
    return team.memberships.select_related("user").order_by("created_at", "id")


def team_owner_count(*, team: Team) -> int:
    return team.memberships.filter(role="owner").count()


def team_invitations_pending(*, team: Team) -> QuerySet[Invitation]:
    return team.invitations.filter(status=Invitation.Status.PENDING).select_related("invited_by")


def team_invitations(*, team: Team) -> QuerySet[Invitation]:
    return team.invitations.select_related("invited_by", "accepted_by")


def team_events(*, team: Team) -> QuerySet[TeamEvent]:
    return TeamEvent.objects.filter(team=team).select_related("actor").order_by("-created_at", "-id")


def invitations_pending_for(*, user) -> QuerySet[Invitation]:
    """Pending invitations addressed to one of the user's verified e-mail addresses (for /teams/)."""
    addresses = EmailAddress.objects.filter(user=user, verified=True).values_list("email", flat=True)
    return (
        Invitation.objects.filter(status=Invitation.Status.PENDING, team__deleted_at__isnull=True)
        .filter(email__in=[a.lower() for a in addresses])
        .select_related("team", "invited_by")
    )


@dataclass(frozen=True)
class Holdings:
    """What a team's account still holds: a team with any of it cannot be deleted."""

    instances: int
    volumes: int
    balance_fen: int

    @property
    def empty(self) -> bool:
        return not (self.instances or self.volumes or self.balance_fen)


def team_holdings(*, team: Team) -> Holdings:
    account = team.account
    return Holdings(
        instances=account.instances.exclude(status__in=_INSTANCE_DONE).count(),
        volumes=account.volumes.exclude(status__in=_VOLUME_DONE).count(),
        balance_fen=balance_get(user=account).total,
    )


def teams_for_staff() -> QuerySet[Team]:
    """Every team, live first, with its member count and balance (cash and trial credit): one query."""
    balance = (
        LedgerAccount.objects.filter(owner_id=OuterRef("account_id"), kind__in=LedgerAccount.USER_KINDS)
        .order_by()
        .values("owner_id")
        .annotate(total=Sum("balance"))
        .values("total")
    )
    return (
        Team.objects.select_related("created_by", "account")
        .annotate(members=Count("memberships"), balance_fen=Coalesce(Subquery(balance), Value(0)))
        .order_by(F("deleted_at").asc(nulls_first=True), "name", "id")
    )
