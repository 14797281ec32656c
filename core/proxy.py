"""The one type the console's reverse proxy (``console.proxy``) and the providers share.

A backend's ``proxy_target`` says where a user's server listens with a ``ProxyTarget``; the proxy
forwards to it. It lives here, below both, so a provider never imports the proxy (and its HTTP and
WebSocket machinery) to name its answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ProxyTarget:
    """Where to send one user's requests for one server, and the credentials to add on the way."""

    host: str
    port: int
    strip_prefix: bool = False  # True: the server serves at "/" (code-server); False: at our path (Jupyter)
    headers: tuple[tuple[str, str], ...] = ()
    cookies: tuple[tuple[str, str], ...] = ()
    secrets: tuple[str, ...] = field(default=(), repr=False)  # redacted from Location headers if echoed
