"""User content: where a user's server listens, and the addresses the browser reaches it at.

``ProxyTarget`` is the one type the console's reverse proxy (``console.reverse_proxy``) and the
providers share: a backend's ``proxy_target`` says where a user's server listens with one, and the
proxy forwards to it. It lives here, below both, so a provider never imports the proxy (and its HTTP
and WebSocket machinery) to name its answer. The rest names user content's own origins: one host per
instance (``content_host``), which instance a host or a path is (``label_of_host``,
``path_matches_label``), and the links console pages give (``proxy_link``, ``proxy_public_link``).
"""

from __future__ import annotations

import re
import uuid
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


# The label of an instance's own origin: the first 16 hex digits of its id (64 bits). The lists' 8-digit
# short id would let someone who launches many instances hope for one whose origin is a stranger's
# (the birthday bound: a thousand of theirs among a hundred thousand others collide about once in 40).
LABEL_LENGTH = 16
_LABEL = re.compile(rf"^[0-9a-f]{{{LABEL_LENGTH}}}$")


def content_label(instance_id) -> str:
    """The first DNS label of instance ``instance_id``'s origin (``<label>.<CONSOLE_PROXY_HOST>``)."""
    return uuid.UUID(str(instance_id)).hex[:LABEL_LENGTH]


def content_host(instance_id) -> str:
    """The host of instance ``instance_id``'s user content: ``<label>.<CONSOLE_PROXY_HOST>`` (the port, if
    the setting has one, kept), so each instance's servers are an origin of their own."""
    return f"{content_label(instance_id)}.{settings.CONSOLE_PROXY_HOST}"


def label_of_host(host: str) -> str | None:
    """The instance label of a request's ``host`` (port and case ignored) on the user-content domain;
    "" for the bare ``CONSOLE_PROXY_HOST`` (no instance's), None for any other host."""
    parent = (getattr(settings, "CONSOLE_PROXY_HOST", "") or "").rsplit(":", 1)[0].lower()
    name = host.rsplit(":", 1)[0].lower()
    if not parent:
        return None
    if name == parent:
        return ""
    if not name.endswith(f".{parent}"):
        return None
    label = name[: -len(parent) - 1]  # anything deeper than one label is no instance's, but still ours
    return label if _LABEL.match(label) else ""


def instance_of_path(path: str) -> str:
    """The instance id in a proxy path (``/i/<id>/lab/`` → ``<id>``), or ""."""
    prefix = getattr(settings, "CONSOLE_PROXY_PREFIX", "/i/")
    return path[len(prefix) :].split("/", 1)[0] if path.startswith(prefix) else ""


def path_matches_label(path: str, label: str) -> bool:
    """The proxy path names the instance whose origin ``label`` is (a malformed id matches nothing)."""
    try:
        return bool(label) and content_label(instance_of_path(path)) == label
    except ValueError:
        return False


def proxy_link(path: str) -> str:
    """The link a console page gives for a user server's ``path`` (``/i/<id>/lab/``).

    On the console's own host (``CONSOLE_PROXY_HOST`` empty) it is the path itself. With a separate
    domain for user content, it is the console's hand-off (``console.proxy_handoff``), which signs the
    browser in on the instance's own host and sends it on: the console's session cookie never goes there.
    """
    if not getattr(settings, "CONSOLE_PROXY_HOST", ""):
        return path
    return f"{settings.CONSOLE_PROXY_HANDOFF_PATH}?next={quote(path, safe='/')}"


def proxy_public_link(path: str) -> str:
    """A link that needs no sign-in (a share link): on its instance's own host when there are such."""
    if not getattr(settings, "CONSOLE_PROXY_HOST", ""):
        return path
    return f"//{content_host(instance_of_path(path))}{path}"
