"""Signing a browser in on the user-content host (``CONSOLE_PROXY_HOST``), in the spirit of JupyterHub's
OAuth hand-off, so that the console's session cookie is never sent to user content.

1. A console page links a user server through ``/open/?next=/i/<id>/lab/`` (``core.proxy.proxy_link``).
   That view, on the console's host and behind its session, makes a **one-time token** (signed, valid
   ``CONSOLE_PROXY_HANDOFF_TTL_S`` seconds, its nonce kept in the cache until used) and redirects to
   ``<proxy host>/i/_handoff?token=…``.
2. The proxy, on the user-content host, redeems it once (``handoff_redeem``) and answers with a redirect
   to ``next`` that sets its own cookie (``CONSOLE_PROXY_COOKIE_NAME``): host-only, HttpOnly, signed,
   ``CONSOLE_PROXY_COOKIE_AGE_S`` long. That cookie, not the session, says who the visitor is there.
3. The proxy never forwards that cookie upstream and never lets an upstream set one of that name.

A notebook's output that calls the console's API from the user host is cross-origin to the console
and carries no console cookie; reading ``document.cookie`` there finds no console cookie either.
"""

from __future__ import annotations

import secrets
from urllib.parse import quote

from django.conf import settings
from django.core import signing
from django.core.cache import cache

TOKEN_SALT = "console.proxy.handoff"  # noqa: S105 (a signing namespace, not a secret)
COOKIE_SALT = "console.proxy.content-cookie"


def next_is_safe(path: str) -> bool:
    """Only a path under the proxy prefix: the hand-off is no open redirect."""
    prefix = settings.CONSOLE_PROXY_PREFIX
    return path.startswith(prefix) and "//" not in path and "\\" not in path and not path.startswith(f"{prefix}_")


def handoff_token(*, user_id: int, next_path: str) -> str:
    nonce = secrets.token_urlsafe(16)
    cache.set(f"proxy-handoff:{nonce}", user_id, timeout=settings.CONSOLE_PROXY_HANDOFF_TTL_S)
    return signing.dumps({"u": user_id, "n": nonce, "p": next_path}, salt=TOKEN_SALT)


def handoff_url(*, user_id: int, next_path: str, scheme: str) -> str:
    token = handoff_token(user_id=user_id, next_path=next_path)
    return f"{scheme}://{settings.CONSOLE_PROXY_HOST}{settings.CONSOLE_PROXY_PREFIX}_handoff?token={quote(token)}"


def handoff_redeem(token: str) -> tuple[int, str] | None:
    """(user id, next path) for a token that is genuine, fresh and not used before; else None."""
    try:
        data = signing.loads(token, salt=TOKEN_SALT, max_age=settings.CONSOLE_PROXY_HANDOFF_TTL_S)
    except signing.BadSignature:
        return None
    if not isinstance(data, dict) or not next_is_safe(str(data.get("p", ""))):
        return None
    # One use: the nonce is deleted by the first redemption; a replayed token finds it gone.
    if cache.get(f"proxy-handoff:{data.get('n')}") != data.get("u") or not cache.delete(f"proxy-handoff:{data['n']}"):
        return None
    return int(data["u"]), str(data["p"])


def content_cookie(user_id: int) -> str:
    return signing.dumps({"u": user_id}, salt=COOKIE_SALT)


def content_cookie_user_id(value: str) -> int | None:
    try:
        data = signing.loads(value, salt=COOKIE_SALT, max_age=settings.CONSOLE_PROXY_COOKIE_AGE_S)
    except signing.BadSignature:
        return None
    return int(data["u"]) if isinstance(data, dict) and "u" in data else None
