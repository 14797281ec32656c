"""Templates' view of the acting context: the current team (or none) and the user's teams."""

from __future__ import annotations

from django.utils.functional import SimpleLazyObject

from teams.selectors import memberships_for


def acting_context(request) -> dict:
    """``acting_membership`` (``None`` when personal) and ``my_memberships`` (lazy: one query, only
    when a page shows the switcher)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {
        "acting_membership": getattr(request, "membership", None),
        "my_memberships": SimpleLazyObject(lambda: list(memberships_for(user=user))),
    }
