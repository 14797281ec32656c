"""The gateway's keys, derived from ``GATEWAY_KEY_SECRET``: nothing to store, and every replica agrees.

- Each instance's gateway key (Ed25519): the public half goes into the instance's authorized keys at
  launch (``instance_authorized_keys``, the instances app's ``instances.hooks.authorized_keys``); the
  private half is derived again when the gateway logs in. One key per instance, so a key taken from one
  machine opens no other.
- The gateway's host key, unless ``GATEWAY_HOST_KEY_FILE`` names one: replicas behind one address must
  present the same host key, or clients warn of a man in the middle.
"""

from __future__ import annotations

import hashlib
import hmac

import asyncssh
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings

KEY_COMMENT = "gpu-console-gateway"


def _derive(label: str) -> Ed25519PrivateKey:
    secret = str(settings.GATEWAY_KEY_SECRET).encode()
    seed = hmac.new(secret, f"gpu-console ssh gateway: {label}".encode(), hashlib.sha256).digest()
    return Ed25519PrivateKey.from_private_bytes(seed)


def _as_asyncssh(key: Ed25519PrivateKey) -> asyncssh.SSHKey:
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    return asyncssh.import_private_key(pem)


def instance_private_key(instance_id) -> asyncssh.SSHKey:
    """The key the gateway logs in to instance ``instance_id`` with."""
    return _as_asyncssh(_derive(f"instance {instance_id}"))


def instance_public_key(instance_id) -> str:
    """The authorized_keys line of instance ``instance_id``'s gateway key."""
    public = _derive(f"instance {instance_id}").public_key()
    line = public.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return f"{line} {KEY_COMMENT}"


def instance_authorized_keys(*, instance) -> list[str]:
    """``instances.hooks.authorized_keys``: the gateway's key for this instance, while the gateway is on."""
    return [instance_public_key(instance.pk)] if settings.GATEWAY_ENABLED else []


def host_key() -> asyncssh.SSHKey:
    """The gateway's host key: ``GATEWAY_HOST_KEY_FILE``, or the one derived from the secret."""
    if settings.GATEWAY_HOST_KEY_FILE:
        return asyncssh.read_private_key(settings.GATEWAY_HOST_KEY_FILE)
    return _as_asyncssh(_derive("host key"))
