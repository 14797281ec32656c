"""API token authentication that knows teams: the one configured in ``REST_FRAMEWORK``.

A token scoped to a team (``APIToken.team``) acts on the team's account: ``request.principal`` is
``team.account`` and ``request.membership`` the maker's membership, read again on every request
(``teams.context.acting_context_for``), so a token of someone who left or was removed stops working
at their next call (401). A personal token acts on its maker's own account. Accounts sits below teams,
so the token checks themselves (digest, expiry, read-only scope) stay there and this class adds the
acting context on top.
"""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions

from accounts.authentication import APITokenAuthentication
from teams.context import acting_context_for


class TeamMembershipEnded(exceptions.AuthenticationFailed):
    default_detail = _("This API token acts in a team you are no longer a member of: it no longer works.")
    default_code = "team_membership_ended"


class TeamTokenAuthentication(APITokenAuthentication):
    def authenticate(self, request):
        found = super().authenticate(request)
        if found is None:
            return None
        user, token = found
        principal, membership = user, None
        if token.team_id is not None:
            principal, membership = acting_context_for(user, token.team_id)
            if membership is None:
                raise TeamMembershipEnded()
        # On the HttpRequest, which DRF's Request reads attributes through: views see one context.
        request._request.principal, request._request.membership = principal, membership
        return user, token
