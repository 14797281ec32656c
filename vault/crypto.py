"""The encryption of secret values at rest: Fernet (AES-128-CBC with an HMAC-SHA256, from ``cryptography``).

The key comes from ``VAULT_KEYS`` when the operator sets it (Fernet keys, newest first), else it is
derived from ``SECRET_KEY`` and then each of ``SECRET_KEY_FALLBACKS``. Deriving it means a console
works without a setting of its own, and a database dump alone (a backup, a replica) reveals no value:
the key lives with the settings, not in the tables. Rotating ``SECRET_KEY`` the Django way (the old
one moved to ``SECRET_KEY_FALLBACKS``) keeps old values readable: ``MultiFernet`` decrypts with any
key and encrypts with the first, and a value is re-encrypted whenever it is replaced. A dedicated
``VAULT_KEYS`` lets an operator rotate ``SECRET_KEY`` (sessions, signed links) without touching the
secrets, or keep the secrets' key in a separate store.
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# A fixed label so the derived key is not the digest of SECRET_KEY that another use might compute.
_LABEL = b"gpu-console vault v1\x00"


def _derived(secret_key: str) -> bytes:
    return base64.urlsafe_b64encode(hashlib.sha256(_LABEL + secret_key.encode()).digest())


def _keys() -> list[bytes]:
    configured = [k.strip() for k in (getattr(settings, "VAULT_KEYS", ()) or ()) if k.strip()]
    if configured:
        return [k.encode() for k in configured]
    return [_derived(settings.SECRET_KEY)] + [_derived(k) for k in getattr(settings, "SECRET_KEY_FALLBACKS", ())]


def _fernet() -> MultiFernet:
    try:
        return MultiFernet([Fernet(key) for key in _keys()])
    except ValueError as exc:  # a malformed VAULT_KEYS entry
        raise ImproperlyConfigured("VAULT_KEYS must be Fernet keys (Fernet.generate_key()).") from exc


class Undecryptable(Exception):
    """The stored value was encrypted with a key the console no longer has."""


def encrypt(value: str) -> str:
    return _fernet().encrypt(value.encode()).decode("ascii")


def decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode("ascii")).decode()
    except InvalidToken as exc:
        raise Undecryptable from exc
