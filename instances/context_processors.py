"""The staff menu's count of quota requests waiting for a decision, on every page a staff member sees.

Lazy, like billing's low-balance banner: the one COUNT runs only when a template reads it (the full
page's menu, not htmx partials), and never for anyone who is not staff.
"""

from __future__ import annotations

from django.utils.functional import SimpleLazyObject

from instances.selectors import quota_requests_waiting_count


def quota_waiting(request) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or not user.is_staff:
        return {}
    return {"quota_waiting": SimpleLazyObject(quota_requests_waiting_count)}
