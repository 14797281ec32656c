"""The acting context: whose account a signed-in person acts on.

``request.user`` is the person; ``request.principal`` is the account whose resources and money they
act on: the person themself in the personal context, the team's account in a team's. The session
remembers the team (``SESSION_KEY``), and the membership is checked against the database on every
request, so someone removed from a team loses its context at their next request.
"""

from __future__ import annotations

from teams.models import Membership
from teams.selectors import membership_for_team_id

SESSION_KEY = "acting_team"


def acting_context_for(user, team_id) -> tuple[object, Membership | None]:
    """``(principal, membership)`` for ``user`` acting in team ``team_id`` (``None``: personal).

    Not a member (any more), or a deleted team: the personal context, ``(user, None)``. One query
    when ``team_id`` is given, none otherwise. For the middleware, and for API authentication with a
    token scoped to a team.
    """
    if team_id in (None, "") or not getattr(user, "is_authenticated", False):
        return user, None
    membership = membership_for_team_id(user=user, team_id=team_id)
    if membership is None:
        return user, None
    return membership.team.account, membership


def acting_team_set(request, team_id: int | None) -> None:
    """Switch ``request``'s session (and the request itself) to team ``team_id``, or to personal."""
    if team_id is None:
        request.session.pop(SESSION_KEY, None)
    else:
        request.session[SESSION_KEY] = int(team_id)
    request.principal, request.membership = acting_context_for(request.user, team_id)
