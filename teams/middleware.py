"""Sets ``request.principal`` and ``request.membership`` (``teams.context``); after AuthenticationMiddleware."""

from __future__ import annotations

from django.utils.functional import SimpleLazyObject

from teams.context import SESSION_KEY, acting_context_for


class ActingContextMiddleware:
    """The acting context of every request, re-checked against the database each time.

    Without a team in the session nothing is queried and ``request.principal`` is whoever
    ``request.user`` is when it is first read: DRF authenticates a token after the middleware has run
    and then sets ``request.user`` to the token's user, so the principal must not be bound to the
    session's (anonymous) user now. With one, one query finds the membership; when it is gone (removed, left, the
    team deleted) the session forgets the team and the request is personal.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        team_id = request.session.get(SESSION_KEY) if hasattr(request, "session") else None
        if team_id is None:
            request.principal, request.membership = SimpleLazyObject(lambda: request.user), None
        else:
            request.principal, request.membership = acting_context_for(request.user, team_id)
            if request.membership is None:
                request.session.pop(SESSION_KEY, None)
        return self.get_response(request)
