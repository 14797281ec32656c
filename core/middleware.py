"""Middleware the console's pages and API share."""

from __future__ import annotations


class SynchronousChain:
    """Last in ``MIDDLEWARE``: the middleware above it, and the views, run synchronously in one thread.

    Under ASGI, Django keeps the chain asynchronous down to the first middleware that cannot run so,
    and an asynchronous chain calls each of Django's own middleware (sessions, locale, CSRF, auth,
    messages…) through ``sync_to_async``: a hop between threads for every ``process_request`` and
    ``process_response``, more than a dozen per request, before the (synchronous) view. Being
    synchronous only, this one turns the whole chain synchronous: one hop in at the top, one out here.
    """

    sync_capable = True
    async_capable = False

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)
