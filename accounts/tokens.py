"""Tokens scoped to a team: which teams a person may choose, and the team's audit of its tokens.

Accounts sits below teams and imports nothing of them: the hook ``accounts.hooks.token_teams`` (teams
answers it) answers ``choices(user)`` (``[{"id", "slug", "name"}, …]``: the teams the
person may act in), ``allowed(user, team_id)`` and records ``created(token, actor)`` / ``revoked(token, actor)``
in the team's audit log, inside the transaction that makes the change. Without the hook every token is
personal.
"""

from __future__ import annotations

from accounts.hooks import token_teams


def token_team_choices(*, user) -> list[dict]:
    return list(token_teams.get().choices(user=user))


def token_team_allowed(*, user, team_id: int) -> bool:
    return bool(token_teams.get().allowed(user=user, team_id=team_id))


def token_team_event(*, token, actor, action: str) -> None:
    """``action`` is ``created`` or ``revoked``; a personal token has no team to tell."""
    if token.team_id is not None:
        getattr(token_teams.get(), action)(token=token, actor=actor)
