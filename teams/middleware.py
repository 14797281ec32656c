"""Sets ``request.principal`` and ``request.membership`` (``teams.context``); after AuthenticationMiddleware."""

from __future__ import annotations

from teams.context import SESSION_KEY, acting_context_for


class ActingContextMiddleware:
    """The acting context of every request, re-checked against the database each time.

    Without a team in the session nothing is queried and ``request.principal`` is ``request.user``
    itself (still lazy). With one, one query finds the membership; when it is gone (removed, left, the
    team deleted) the session forgets the team and the request is personal.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        team_id = request.session.get(SESSION_KEY) if hasattr(request, "session") else None
        if team_id is None:
            request.principal, request.membership = request.user, None
        else:
            request.principal, request.membership = acting_context_for(request.user, team_id)
            if request.membership is None:
                request.session.pop(SESSION_KEY, None)
        return self.get_response(request)
