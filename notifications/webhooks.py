"""Signing and sending one webhook POST, with the guards a URL typed by a user needs.

The signature follows Stripe's and Standard Webhooks' shape: the header

    Console-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" with the endpoint's secret>

so a receiver checks the body it got, and the timestamp bounds replays (README, "Notifications").

A user's URL is a way into our network (SSRF): the host is resolved once, every address must be a
public one (unless ``NOTIFICATIONS_WEBHOOK_ALLOW_PRIVATE``), and the connection goes to that address
itself (TLS still checks the name), so a DNS answer cannot change between the check and the POST.
Redirects are never followed and the timeouts are short: a slow receiver costs one worker seconds.
Socket timeouts bound each read alone, so a receiver that drips a byte every few seconds would hold
the worker for as long as it liked; one overall deadline (``NOTIFICATIONS_WEBHOOK_DEADLINE_S``) cuts
the connection off however the bytes are paced.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import socket
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import urllib3
from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

SIGNATURE_HEADER = "Console-Signature"
LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}


class WebhookRefused(Exception):
    """Permanent: the URL may not be called (scheme, address). Never retried."""


class WebhookTransient(Exception):
    """The receiver did not answer 2xx this time (timeout, refused connection, 5xx…): retried."""


def signature(*, secret: str, timestamp: int, body: bytes) -> str:
    """The ``Console-Signature`` header's value for ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def signature_verify(*, secret: str, header: str, body: bytes, tolerance_s: int = 300, now: int | None = None) -> bool:
    """What a receiver does (the README shows the same in a few lines): the HMAC matches and the
    timestamp is recent."""
    try:
        parts = dict(item.split("=", 1) for item in header.split(","))
        timestamp = int(parts["t"])
    except (ValueError, KeyError):
        return False
    now = int(time.time()) if now is None else now
    if abs(now - timestamp) > tolerance_s:
        return False
    expected = signature(secret=secret, timestamp=timestamp, body=body).split("v1=", 1)[1]
    return hmac.compare_digest(expected, parts.get("v1", ""))


def url_check(url: str) -> str:
    """``url`` if an endpoint may have it: https, or http to this host where
    ``NOTIFICATIONS_WEBHOOK_ALLOW_HTTP_LOCALHOST`` (development and tests); no credentials in it."""
    parts = urlsplit((url or "").strip())
    host = (parts.hostname or "").lower()
    if not host or parts.scheme not in ("http", "https"):
        raise ValidationError(_("Enter a full URL starting with https://."), code="invalid")
    if parts.username or parts.password:
        raise ValidationError(_("Leave user names and passwords out of the URL."), code="credentials")
    if parts.scheme == "http" and not (host in LOCAL_HOSTS and settings.NOTIFICATIONS_WEBHOOK_ALLOW_HTTP_LOCALHOST):
        raise ValidationError(_("Webhook URLs must use https://."), code="https")
    return parts.geturl()


# IPv6 ranges whose addresses carry an IPv4 address in their last 32 bits, and reach that IPv4 host
# through a translator or a dual stack: NAT64's well-known prefix (RFC 6052), IPv4-translated (SIIT,
# RFC 2765) and IPv4-compatible (deprecated, RFC 4291; still routed by some stacks). IPv4-mapped and
# 6to4 have ``ipaddress``'s own accessors.
_LAST_32_BITS_CARRY_IPV4 = (
    ipaddress.IPv6Network("64:ff9b::/96"),
    ipaddress.IPv6Network("::ffff:0:0:0/96"),
    ipaddress.IPv6Network("::/96"),
)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address ``ip`` stands for, when it is one of the forms that embed one; else None.

    ``::`` and ``::1`` sit in ``::/96`` but are IPv6's own unspecified and loopback addresses: not
    decoded (``is_global`` refuses them anyway)."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if int(ip) > 1 and any(ip in network for network in _LAST_32_BITS_CARRY_IPV4):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return ip.is_global and not ip.is_multicast


def _allowed(address: str) -> bool:
    """Whether a webhook may go to ``address``: a public address, and, for an IPv6 address that embeds
    an IPv4 one, a public IPv4 inside too, since a translator (NAT64), a 6to4 relay or a dual stack
    delivers it to that IPv4 host: ``64:ff9b::a9fe:a9fe`` is the metadata service ``169.254.169.254``.
    IPv4-mapped addresses are judged by their IPv4 alone (the range itself is not "global")."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if not isinstance(ip, ipaddress.IPv6Address):
        return _public(ip)
    embedded = _embedded_ipv4(ip)
    if embedded is None:
        return _public(ip)
    if ip.ipv4_mapped is not None:
        return _public(embedded)
    return _public(embedded) and _public(ip)


def resolve(host: str, port: int) -> str:
    """The address to connect to: refused if the name resolves to any address that is not public
    (loopback, private, link-local such as the cloud's metadata service…), unless allowed."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise WebhookTransient(_("The host name %(host)s does not resolve.") % {"host": host}) from exc
    addresses = [info[4][0] for info in infos]
    if not settings.NOTIFICATIONS_WEBHOOK_ALLOW_PRIVATE and not all(_allowed(a) for a in addresses):
        raise WebhookRefused(_("%(host)s resolves to a private or reserved address.") % {"host": host})
    return addresses[0]


class _Deadline:
    """Shuts the connection's socket down once ``seconds`` have passed since ``__enter__``: a read or
    write blocked on it returns at once, and the request fails as a dropped connection would."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.passed = threading.Event()
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._timer = threading.Timer(seconds, self._cut)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket | None) -> None:
        """The socket to cut: the plain one while TLS shakes hands, then the wrapped one."""
        with self._lock:
            self._sock = sock
        if self.passed.is_set():
            self._cut()

    def _cut(self) -> None:
        self.passed.set()
        with self._lock:
            sock = self._sock
        if sock is not None:
            # Already closed, or detached by the TLS wrapper (its replacement is watched next): nothing to cut.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _deadlined(base: type[urllib3.connection.HTTPConnection], deadline: _Deadline) -> type:
    """``base`` whose sockets ``deadline`` watches from the moment they exist."""

    class Deadlined(base):  # type: ignore[valid-type, misc]
        def _new_conn(self) -> socket.socket:
            sock = super()._new_conn()
            deadline.watch(sock)
            return sock

        def connect(self) -> None:
            super().connect()
            deadline.watch(self.sock)

    return Deadlined


@dataclass(frozen=True)
class Answer:
    status_code: int
    duration_ms: int


def post(*, url: str, body: bytes, headers: dict[str, str]) -> Answer:
    """One POST of ``body`` to ``url``; returns the answer's status (any: redirects are not followed).
    Raises ``WebhookRefused`` (never to be sent) or ``WebhookTransient`` (no answer, or none complete
    within ``NOTIFICATIONS_WEBHOOK_DEADLINE_S``)."""
    try:
        url_check(url)
    except ValidationError as exc:
        raise WebhookRefused(" ".join(exc.messages)) from exc
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    address = resolve(host, port)
    timeout = urllib3.Timeout(
        connect=settings.NOTIFICATIONS_WEBHOOK_CONNECT_TIMEOUT_S, read=settings.NOTIFICATIONS_WEBHOOK_READ_TIMEOUT_S
    )
    if parts.scheme == "https":
        pool = urllib3.HTTPSConnectionPool(
            address, port, timeout=timeout, retries=False, server_hostname=host, assert_hostname=host
        )
    else:
        pool = urllib3.HTTPConnectionPool(address, port, timeout=timeout, retries=False)
    deadline = _Deadline(settings.NOTIFICATIONS_WEBHOOK_DEADLINE_S)
    pool.ConnectionCls = _deadlined(pool.ConnectionCls, deadline)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host_header = host if parts.port is None else f"{host}:{parts.port}"
    started = time.monotonic()
    try:
        with deadline:
            response = pool.urlopen(
                "POST",
                path,
                body=body,
                headers={**headers, "Host": host_header},
                redirect=False,
                retries=False,
                preload_content=False,
            )
            response.read(4096, decode_content=False)  # a little of the answer; never a huge one
            response.release_conn()
        if deadline.passed.is_set():  # cut off mid-body: the read ended early rather than failing
            raise OSError("deadline")
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        if deadline.passed.is_set():
            raise WebhookTransient(
                _("No complete answer within %(seconds)s seconds.") % {"seconds": deadline.seconds}
            ) from exc
        raise WebhookTransient(f"{type(exc).__name__}: {exc}"[:500]) from exc
    finally:
        pool.close()
    return Answer(status_code=response.status, duration_ms=int((time.monotonic() - started) * 1000))
