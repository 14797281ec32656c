"""The one type the console's reverse proxy (``console.proxy``) and the providers share.

A backend's ``proxy_target`` says where a user's server listens with a ``ProxyTarget``; the proxy
forwards to it. It lives here, below both, so a provider never imports the proxy (and its HTTP and
WebSocket machinery) to name its answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import quote

from django.conf import settings


@dataclass(frozen=True)
class ProxyTarget:
    """Where to send one user's requests for one server, and the credentials to add on the way."""

    host: str
    port: int
    strip_prefix: bool = False  # True: the server serves at "/" (code-server); False: at our path (Jupyter)
    headers: tuple[tuple[str, str], ...] = ()
    cookies: tuple[tuple[str, str], ...] = ()
    secrets: tuple[str, ...] = field(default=(), repr=False)  # redacted from Location headers if echoed


def proxy_link(path: str) -> str:
    """The link a console page gives for a user server's ``path`` (``/i/<id>/lab/``).

    On the console's own host (``CONSOLE_PROXY_HOST`` empty) it is the path itself. With a separate
    host for user content, it is the console's hand-off (``console.proxy_handoff``), which signs the
    browser in on that host and sends it on: the console's session cookie never goes there.
    """
    if not getattr(settings, "CONSOLE_PROXY_HOST", ""):
        return path
    return f"{settings.CONSOLE_PROXY_HANDOFF_PATH}?next={quote(path, safe='/')}"


def proxy_public_link(path: str) -> str:
    """A link that needs no sign-in (a share link): on the user-content host when there is one."""
    host = getattr(settings, "CONSOLE_PROXY_HOST", "")
    return f"//{host}{path}" if host else path
