"""What teams answers for the apps below it: billing's, accounts' and notifications' hooks.

``BillingTeams`` (``billing.hooks.team_wallets``): what a membership may do with the team's wallet, and
which accounts are teams'. ``TokenTeams`` (``accounts.hooks.token_teams``): the teams a person may scope
a token to, and the team's audit events of its tokens. Who hears about a team's account
(``notifications.hooks.recipients``) is ``teams.notifications``. ``TeamsConfig.ready()`` calls ``wire``.
"""

from __future__ import annotations

from accounts import hooks as accounts_hooks
from billing import hooks as billing_hooks
from notifications import hooks as notifications_hooks
from teams.models import Team, TeamEvent
from teams.notifications import team_notification_recipients
from teams.roles import Permission, membership_can
from teams.selectors import memberships_for
from teams.services import team_event_record

# billing.access's actions, as the permissions that grant them.
_BILLING_ACTIONS = {
    "view": Permission.BILLING_VIEW,  # owners, admins and billing viewers
    "pay": Permission.MONEY_MOVE,  # owners and admins top up the team, as they pay into it
}


class BillingTeams(billing_hooks.TeamWallets):
    def allows(self, *, membership, action: str) -> bool:
        perm = _BILLING_ACTIONS.get(action)
        return perm is not None and membership_can(membership, perm)

    def is_team_account(self, *, user) -> bool:
        return Team.objects.filter(account_id=user.pk).exists()


class TokenTeams(accounts_hooks.TokenTeams):
    def choices(self, *, user) -> list[dict]:
        """Every live team the person is in: any role may act in its team (what it may do there is the role's)."""
        return [{"id": m.team_id, "slug": m.team.slug, "name": m.team.name} for m in memberships_for(user=user)]

    def allowed(self, *, user, team_id: int) -> bool:
        return memberships_for(user=user).filter(team_id=team_id).exists()

    def created(self, *, token, actor) -> None:
        _token_event(token=token, actor=actor, action=TeamEvent.Action.TOKEN_CREATED)

    def revoked(self, *, token, actor) -> None:
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


def wire() -> None:
    """Register teams' answers to the hooks of the apps below it."""
    billing_hooks.team_wallets.implement(BillingTeams())
    accounts_hooks.token_teams.implement(TokenTeams())
    notifications_hooks.recipients.implement(team_notification_recipients)
