"""Tokens scoped to a team: which teams a person may choose, and the team's audit of its tokens.

Accounts sits below teams and imports nothing of them: the object named by ``ACCOUNTS_TOKEN_TEAMS_HOOK``
(``teams.hooks.TokenTeams``) answers ``choices(user)`` (``[{"id", "slug", "name"}, …]``: the teams the
person may act in), ``allowed(user, team_id)`` and records ``created(token, actor)`` / ``revoked(token, actor)``
in the team's audit log, inside the transaction that makes the change. Without the hook every token is
personal.
"""

from __future__ import annotations

from django.conf import settings
from django.utils.module_loading import import_string


def _hook():
    path = getattr(settings, "ACCOUNTS_TOKEN_TEAMS_HOOK", "")
    return import_string(path) if path else None


def token_team_choices(*, user) -> list[dict]:
    hook = _hook()
    return list(hook.choices(user=user)) if hook else []


def token_team_allowed(*, user, team_id: int) -> bool:
    hook = _hook()
    return bool(hook and hook.allowed(user=user, team_id=team_id))


def token_team_event(*, token, actor, action: str) -> None:
    """``action`` is ``created`` or ``revoked``; a personal token has no team to tell."""
    hook = _hook()
    if hook and token.team_id is not None:
        getattr(hook, action)(token=token, actor=actor)
