"""What accounts asks of the apps above it: each question a hook (``core.hooks``), declared here.

Accounts sits below teams and imports nothing of them; an API token scoped to a team asks these hooks,
which teams answers from ``teams/wiring.py`` (``manage.py hooks`` lists who).
"""

from __future__ import annotations

from core.hooks import Hook


class TokenTeams:
    """The teams a token may be scoped to, and the team's audit of its tokens. Without teams every token
    is personal."""

    def choices(self, *, user) -> list[dict]:
        """The teams ``user`` may scope a token to, as ``[{"id", "slug", "name"}, …]``."""
        return []

    def allowed(self, *, user, team_id: int) -> bool:
        """Whether ``user`` may scope a token to team ``team_id`` now."""
        return False

    def created(self, *, token, actor) -> None:
        """``actor`` made ``token``, scoped to a team: record it in the team's audit log (same transaction)."""

    def revoked(self, *, token, actor) -> None:
        """``actor`` revoked ``token``, scoped to a team: record it in the team's audit log."""


token_teams: Hook[TokenTeams] = Hook(
    TokenTeams,
    name="accounts.hooks.token_teams",
    about="the teams a token may be scoped to, and the team's audit of its tokens",
)
"""Teams answers which teams a token may act in, and audits its tokens (``accounts/tokens.py`` asks)."""
