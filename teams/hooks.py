"""What teams fills in for the apps below it (their hooks in settings): billing's and accounts'.

``BillingTeams`` (``BILLING_TEAMS_HOOK``): what a membership may do with the team's wallet, and which
accounts are teams'. ``TokenTeams`` (``ACCOUNTS_TOKEN_TEAMS_HOOK``): the teams a person may scope a
token to, and the team's audit events of its tokens.
"""

from __future__ import annotations

from teams.models import Team, TeamEvent
from teams.roles import Permission, membership_can
from teams.selectors import memberships_for
from teams.services import team_event_record

# billing.access's actions, as the permissions that grant them.
_BILLING_ACTIONS = {
    "view": Permission.BILLING_VIEW,  # owners, admins and billing viewers
    "pay": Permission.MONEY_MOVE,  # owners and admins top up the team, as they pay into it
}


class BillingTeams:
    @staticmethod
    def allows(*, membership, action: str) -> bool:
        perm = _BILLING_ACTIONS.get(action)
        return perm is not None and membership_can(membership, perm)

    @staticmethod
    def is_team_account(*, user) -> bool:
        return Team.objects.filter(account_id=user.pk).exists()


class TokenTeams:
    @staticmethod
    def choices(*, user) -> list[dict]:
        """Every live team the person is in: any role may act in its team (what it may do there is the role's)."""
        return [{"id": m.team_id, "slug": m.team.slug, "name": m.team.name} for m in memberships_for(user=user)]

    @staticmethod
    def allowed(*, user, team_id: int) -> bool:
        return memberships_for(user=user).filter(team_id=team_id).exists()

    @staticmethod
    def created(*, token, actor) -> None:
        _token_event(token=token, actor=actor, action=TeamEvent.Action.TOKEN_CREATED)

    @staticmethod
    def revoked(*, token, actor) -> None:
        _token_event(token=token, actor=actor, action=TeamEvent.Action.TOKEN_REVOKED)


def _token_event(*, token, actor, action: str) -> None:
    account_id = Team.objects.filter(pk=token.team_id).values_list("account_id", flat=True).first()
    if account_id is not None:
        team_event_record(
            account=account_id,
            actor=actor,
            action=action,
            target=token.name,
            details={"prefix": token.prefix, "scope": token.scope, "owner": token.user.email},
        )
