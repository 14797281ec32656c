"""The header bell's unread count, on every page of a signed-in user.

Lazy, like billing's low-balance banner: the one COUNT runs only when a template reads it (the full
page's header, not an htmx partial), at most once per request however many templates render.
"""

from __future__ import annotations

from django.utils.functional import SimpleLazyObject

from notifications.selectors import notification_unread_count


def _count(request) -> int:
    if not hasattr(request, "_notifications_unread"):
        request._notifications_unread = notification_unread_count(user=request.user)
    return request._notifications_unread


def unread(request) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"notifications_unread": SimpleLazyObject(lambda: _count(request))}
