"""Which address a request comes from, when proxies stand between the client and the console.

A proxy says whom it serves in ``X-Forwarded-For``; anyone else can write the same header. So the
header counts only as far as the hops that wrote it are ours: walking it from the right (the hop
nearest the console), each address is believed only if the one that reported it is a trusted proxy
(``CONSOLE_TRUSTED_PROXIES``, loopback by default). The first address not trusted is the client.

``TrustedProxyMiddleware`` does this once, first in the chain: ``REMOTE_ADDR`` becomes that client,
and the header is dropped (``X-Forwarded-Proto`` too, unless a trusted proxy sent it), so the rest (the ``/metrics`` allow-list, DRF's throttles, allauth's rate
limits, the security log) all read one address and none can be talked into another. The ASGI server
runs without its own proxy handling (``--no-proxy-headers``), so this is the only place that decides.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from django.conf import settings
from django.http import HttpRequest, HttpResponse

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def _networks(spec: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(item.strip(), strict=False) for item in spec if item.strip())


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    text = text.strip()
    if text.startswith("[") and "]" in text:  # [v6]:port
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:  # v4:port
        text = text.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def proxy_trusted(address: str) -> bool:
    """Whether ``address`` is one of ``CONSOLE_TRUSTED_PROXIES``."""
    parsed = _address(address)
    return parsed is not None and any(parsed in net for net in _networks(tuple(settings.CONSOLE_TRUSTED_PROXIES)))


def client_address(*, peer: str, forwarded_for: str) -> str:
    """The client's address: ``peer`` (who connected) unless it is a trusted proxy, in which case the
    last hop it reports, and so on leftwards while the hops are trusted proxies too. A hop that is not
    an address ends the walk at the proxy that wrote it."""
    current = peer
    hops = [hop for hop in forwarded_for.split(",") if hop.strip()] if forwarded_for else []
    while hops and proxy_trusted(current):
        hop = _address(hops.pop())
        if hop is None:
            break
        current = str(hop)
    return current


class TrustedProxyMiddleware:
    """First in ``MIDDLEWARE``: ``REMOTE_ADDR`` is the client as trusted proxies report it, and
    ``X-Forwarded-For`` is gone, so nothing downstream reads the client's own claim."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        meta = request.META
        peer = meta.get("REMOTE_ADDR", "")
        if not proxy_trusted(peer):
            # Whether the request came over HTTPS is a proxy's word too (``SECURE_PROXY_SSL_HEADER``): a
            # client that connects straight to the console does not get to say it.
            meta.pop("HTTP_X_FORWARDED_PROTO", None)
        forwarded_for = meta.pop("HTTP_X_FORWARDED_FOR", "")
        meta["REMOTE_ADDR"] = client_address(peer=peer, forwarded_for=forwarded_for)
        return self.get_response(request)
