"""Fresh SSH keys for tests, made with ``cryptography`` (no fixtures on disk that could go stale)."""

from __future__ import annotations

import warnings

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed25519, rsa


def _public_line(private_key, comment: str) -> str:
    line = (
        private_key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    return f"{line} {comment}" if comment else line


def ed25519_private():
    return ed25519.Ed25519PrivateKey.generate()


def ed25519_public(comment: str = "alice@laptop") -> str:
    return _public_line(ed25519_private(), comment)


def ecdsa_public(curve: ec.EllipticCurve, comment: str = "alice@laptop") -> str:
    return _public_line(ec.generate_private_key(curve), comment)


def rsa_public(bits: int, comment: str = "alice@laptop") -> str:
    # A small RSA key is refused by the parser; cryptography itself insists on at least 1024 bits.
    return _public_line(rsa.generate_private_key(public_exponent=65537, key_size=bits), comment)


def dsa_public(comment: str = "alice@old-box") -> str:
    # cryptography deprecates DSA in OpenSSH format; people still paste such keys, so we make one.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _public_line(dsa.generate_private_key(key_size=1024), comment)  # noqa: S505 (refused on purpose)


def openssh_private() -> str:
    return (
        ed25519_private()
        .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption())
        .decode()
    )


def pem_private() -> str:
    return (
        ec.generate_private_key(ec.SECP256R1())
        .private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )
        .decode()
    )
