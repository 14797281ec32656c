"""What the pages of several apps share."""

from __future__ import annotations

from functools import wraps

from django.http import Http404, HttpRequest


def staff_only(view):
    """Not staff (or not logged in): the page does not exist."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs):
        if not (request.user.is_authenticated and request.user.is_staff):
            raise Http404
        return view(request, *args, **kwargs)

    return wrapped
