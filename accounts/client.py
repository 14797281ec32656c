"""Who is on the other end of a request, as the security log records it: an IP address and a user agent.

Views, API views and signal receivers pass ``**request_client(request)`` to the services that write
the log, so services take plain keyword arguments and never a request. The IP is the one allauth's
rate limits see (``ALLAUTH_TRUSTED_PROXY_COUNT`` / ``ALLAUTH_TRUSTED_CLIENT_IP_HEADER`` behind a proxy).
"""

from __future__ import annotations

from typing import TypedDict

from allauth.account.adapter import get_adapter
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest


class RequestClient(TypedDict):
    ip: str | None
    user_agent: str


def request_client(request: HttpRequest | None) -> RequestClient:
    """The client's IP (None when unknown) and user agent ("" when none) of ``request``."""
    if request is None:
        return {"ip": None, "user_agent": ""}
    try:
        ip = get_adapter(request).get_client_ip(request)
    except PermissionDenied:  # allauth's answer when the request carries no address (a test's bare request)
        ip = None
    return {"ip": ip or None, "user_agent": request.META.get("HTTP_USER_AGENT", "")}
