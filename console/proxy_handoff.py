"""Signing a browser in on an instance's own host (``<label>.<CONSOLE_PROXY_HOST>``, ``core.user_content``), in
the spirit of JupyterHub's OAuth hand-off, so that the console's session cookie is never sent to user
content, and one instance's sign-in is no sign-in on another's.

1. A console page links a user server through ``/open/?next=/i/<id>/lab/`` (``core.user_content.proxy_link``).
   That view, on the console's host and behind its session, makes a **one-time token** (signed, valid
   ``CONSOLE_PROXY_HANDOFF_TTL_S`` seconds, its nonce kept in the cache until used) and redirects to
   ``<that instance's host>/i/_handoff?token=…``.
2. The proxy, on that host, redeems it once (``handoff_redeem``: on the host of the instance ``next``
   names, nowhere else) and answers with a redirect to ``next`` that sets the host's own cookie
   (``CONSOLE_PROXY_COOKIE_NAME``): host-only, HttpOnly, signed for that host's label,
   ``CONSOLE_PROXY_COOKIE_AGE_S`` long. That cookie, not the session, says who the visitor is there.
3. The proxy never forwards that cookie upstream and never lets an upstream set one of that name.

The cookie is bound to the console session that handed off: it names a binding kept in the cache
(never the session key itself, which would then travel to user content's host), and each request
there checks that session as Django would (``django.contrib.auth.get_user``: it still exists, is
the same user's, and its password hash is current). Logging out (the session is deleted), changing
the password (the session key is cycled, every other session's hash goes stale) or the session
expiring ends the sign-in on every instance's host too, not ``CONSOLE_PROXY_COOKIE_AGE_S`` later.

A notebook's output that calls the console's API from an instance's host is cross-origin to the
console and carries no console cookie; reading ``document.cookie`` there finds no console cookie, and
no other instance's; a fetch of another instance's server is cross-origin, and the cookie it would
carry is no good on that host either.
"""

from __future__ import annotations

import secrets
from importlib import import_module
from urllib.parse import quote

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model, load_backend
from django.core import signing
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.utils.crypto import constant_time_compare

from core.user_content import content_host, content_label, instance_of_path, path_matches_label

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


def handoff_token(*, user_id: int, session_key: str, next_path: str) -> str:
    """A one-time token for ``next_path``. The session key stays in the cache, out of the URL."""
    nonce = secrets.token_urlsafe(16)
    cache.set(f"proxy-handoff:{nonce}", {"u": user_id, "s": session_key}, timeout=settings.CONSOLE_PROXY_HANDOFF_TTL_S)
    return signing.dumps({"u": user_id, "n": nonce, "p": next_path}, salt=TOKEN_SALT)


def handoff_url(*, user_id: int, session_key: str, next_path: str, scheme: str) -> str:
    """The hand-off on the host of the instance ``next_path`` names (``next_is_safe`` checked it)."""
    token = handoff_token(user_id=user_id, session_key=session_key, next_path=next_path)
    host = content_host(instance_of_path(next_path))
    return f"{scheme}://{host}{settings.CONSOLE_PROXY_PREFIX}_handoff?token={quote(token)}"


def handoff_redeem(token: str, *, label: str) -> tuple[int, str, str] | None:
    """(user id, next path, the handing-off session's key) for a token that is genuine, fresh, not used
    before, and redeemed on the host of the instance it leads to (``label``); else None. A token
    carried to another instance's host signs nobody in there."""
    try:
        data = signing.loads(token, salt=TOKEN_SALT, max_age=settings.CONSOLE_PROXY_HANDOFF_TTL_S)
    except signing.BadSignature:
        return None
    if not isinstance(data, dict) or not next_is_safe(str(data.get("p", ""))):
        return None
    if not path_matches_label(str(data["p"]), label):
        return None
    # One use: the nonce is deleted by the first redemption; a replayed token finds it gone.
    held = cache.get(f"proxy-handoff:{data.get('n')}")
    if not isinstance(held, dict) or held.get("u") != data.get("u") or not cache.delete(f"proxy-handoff:{data['n']}"):
        return None
    return int(data["u"]), str(data["p"]), str(held.get("s") or "")


def content_cookie(user_id: int, *, session_key: str, label: str) -> str:
    """The sign-in cookie of one instance's host: the browser keeps it there (host-only), and its
    signature names the host's label, so a copy taken to another instance's host is worth nothing.
    It names a binding to the console session ``session_key`` (kept in the cache as long as the cookie
    lives), so it is worth nothing either once that session ends."""
    binding = secrets.token_urlsafe(16)
    cache.set(f"proxy-content:{binding}", {"u": user_id, "s": session_key}, timeout=settings.CONSOLE_PROXY_COOKIE_AGE_S)
    return signing.dumps({"u": user_id, "h": label, "b": binding}, salt=COOKIE_SALT)


def content_cookie_user(value: str, *, label: str):
    """The active user the cookie ``value`` signs in on the host ``label``, while the console session
    that handed off still holds that user with a current password hash; else None. Synchronous: it
    reads the cache, the session store and the user."""
    try:
        data = signing.loads(value, salt=COOKIE_SALT, max_age=settings.CONSOLE_PROXY_COOKIE_AGE_S)
    except signing.BadSignature:
        return None
    if not isinstance(data, dict) or "u" not in data or data.get("h") != label:
        return None
    binding = cache.get(f"proxy-content:{data.get('b')}")
    if not isinstance(binding, dict) or binding.get("u") != data["u"] or not binding.get("s"):
        return None
    # The checks of django.contrib.auth.get_user, read-only: that one may cycle or flush the session,
    # which is the console's to do, not this host's.
    session = import_module(settings.SESSION_ENGINE).SessionStore(session_key=binding["s"])
    try:
        user_id = get_user_model()._meta.pk.to_python(session[SESSION_KEY])
        backend_path = session[BACKEND_SESSION_KEY]
    except (KeyError, ValidationError):
        return None  # logged out (the session is gone) or never signed in
    if backend_path not in settings.AUTHENTICATION_BACKENDS:
        return None
    user = load_backend(backend_path).get_user(user_id)  # None for an inactive user too
    if user is None or user.pk != data["u"]:
        return None
    session_hash = session.get(HASH_SESSION_KEY) or ""
    current = [user.get_session_auth_hash(), *user.get_session_auth_fallback_hash()]
    if not session_hash or not any(constant_time_compare(session_hash, value) for value in current):
        return None  # the password changed since
    return user
