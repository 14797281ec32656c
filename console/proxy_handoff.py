"""Signing a browser in on an instance's own host (``<label>.<CONSOLE_PROXY_HOST>``, ``core.proxy``), in
the spirit of JupyterHub's OAuth hand-off, so that the console's session cookie is never sent to user
content, and one instance's sign-in is no sign-in on another's.

1. A console page links a user server through ``/open/?next=/i/<id>/lab/`` (``core.proxy.proxy_link``).
   That view, on the console's host and behind its session, makes a **one-time token** (signed, valid
   ``CONSOLE_PROXY_HANDOFF_TTL_S`` seconds, its nonce kept in the cache until used) and redirects to
   ``<that instance's host>/i/_handoff?token=…``.
2. The proxy, on that host, redeems it once (``handoff_redeem``: on the host of the instance ``next``
   names, nowhere else) and answers with a redirect to ``next`` that sets the host's own cookie
   (``CONSOLE_PROXY_COOKIE_NAME``): host-only, HttpOnly, signed for that host's label,
   ``CONSOLE_PROXY_COOKIE_AGE_S`` long. That cookie, not the session, says who the visitor is there.
3. The proxy never forwards that cookie upstream and never lets an upstream set one of that name.

A notebook's output that calls the console's API from an instance's host is cross-origin to the
console and carries no console cookie; reading ``document.cookie`` there finds no console cookie, and
no other instance's; a fetch of another instance's server is cross-origin, and the cookie it would
carry is no good on that host either.
"""

from __future__ import annotations

import secrets
from urllib.parse import quote

from django.conf import settings
from django.core import signing
from django.core.cache import cache

from core.proxy import content_host, content_label, instance_of_path, path_matches_label

TOKEN_SALT = "console.proxy.handoff"  # noqa: S105 (a signing namespace, not a secret)
COOKIE_SALT = "console.proxy.content-cookie"


def next_is_safe(path: str) -> bool:
    """Only a path under the proxy prefix, of an instance (its host is made from the id): the hand-off
    is no open redirect."""
    prefix = settings.CONSOLE_PROXY_PREFIX
    if not path.startswith(prefix) or "//" in path or "\\" in path or path.startswith(f"{prefix}_"):
        return False
    try:
        content_label(instance_of_path(path))
    except ValueError:
        return False
    return True


def handoff_token(*, user_id: int, next_path: str) -> str:
    nonce = secrets.token_urlsafe(16)
    cache.set(f"proxy-handoff:{nonce}", user_id, timeout=settings.CONSOLE_PROXY_HANDOFF_TTL_S)
    return signing.dumps({"u": user_id, "n": nonce, "p": next_path}, salt=TOKEN_SALT)


def handoff_url(*, user_id: int, next_path: str, scheme: str) -> str:
    """The hand-off on the host of the instance ``next_path`` names (``next_is_safe`` checked it)."""
    token = handoff_token(user_id=user_id, next_path=next_path)
    host = content_host(instance_of_path(next_path))
    return f"{scheme}://{host}{settings.CONSOLE_PROXY_PREFIX}_handoff?token={quote(token)}"


def handoff_redeem(token: str, *, label: str) -> tuple[int, str] | None:
    """(user id, next path) for a token that is genuine, fresh, not used before, and redeemed on the host
    of the instance it leads to (``label``); else None. A token carried to another instance's host signs
    nobody in there."""
    try:
        data = signing.loads(token, salt=TOKEN_SALT, max_age=settings.CONSOLE_PROXY_HANDOFF_TTL_S)
    except signing.BadSignature:
        return None
    if not isinstance(data, dict) or not next_is_safe(str(data.get("p", ""))):
        return None
    if not path_matches_label(str(data["p"]), label):
        return None
    # One use: the nonce is deleted by the first redemption; a replayed token finds it gone.
    if cache.get(f"proxy-handoff:{data.get('n')}") != data.get("u") or not cache.delete(f"proxy-handoff:{data['n']}"):
        return None
    return int(data["u"]), str(data["p"])


def content_cookie(user_id: int, *, label: str) -> str:
    """The sign-in cookie of one instance's host: the browser keeps it there (host-only), and its
    signature names the host's label, so a copy taken to another instance's host is worth nothing."""
    return signing.dumps({"u": user_id, "h": label}, salt=COOKIE_SALT)


def content_cookie_user_id(value: str, *, label: str) -> int | None:
    try:
        data = signing.loads(value, salt=COOKIE_SALT, max_age=settings.CONSOLE_PROXY_COOKIE_AGE_S)
    except signing.BadSignature:
        return None
    if not isinstance(data, dict) or "u" not in data or data.get("h") != label:
        return None
    return int(data["u"])
