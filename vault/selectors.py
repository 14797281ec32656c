"""Reads of the vault, scoped to the account that asks: another account's secret is a 404 by construction.

Lists and pages read names and dates only; ``secret_values_for_boot`` is the one read that decrypts,
called while an instance boots to put the values into its spec.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from vault import crypto
from vault.models import RegistryCredential, Secret


def secret_list_for(*, owner) -> QuerySet[Secret]:
    """The account's secrets by name, without their ciphertext (a list never needs it)."""
    return Secret.objects.filter(owner=owner).defer("ciphertext").select_related("created_by")


def secret_get_for(*, owner, name: str) -> Secret:
    """The account's secret called ``name``; a 404 for any other account's."""
    return get_object_or_404(Secret.objects.defer("ciphertext"), owner=owner, name=name)


def secret_values_for_boot(*, owner_id, secret_ids: Iterable) -> dict:
    """``{secret_id: (name, value)}`` for those of ``secret_ids`` that account ``owner_id`` still has,
    decrypted. A value that no key can decrypt any more (the keys were changed without a fallback) is
    left out rather than failing the boot: the machine starts without it, as if it were deleted."""
    found = {}
    for secret in Secret.objects.filter(owner_id=owner_id, pk__in=list(secret_ids)).only("id", "name", "ciphertext"):
        try:
            found[secret.pk] = (secret.name, crypto.decrypt(secret.ciphertext))
        except crypto.Undecryptable:
            continue
    return found


def registry_credential_list_for(*, owner) -> QuerySet[RegistryCredential]:
    """The account's registry credentials by host, without their ciphertext."""
    return RegistryCredential.objects.filter(owner=owner).defer("ciphertext").select_related("created_by")


def registry_login_for(*, owner_id, host: str) -> tuple[str, str] | None:
    """``(username, password)`` account ``owner_id`` saved for the registry ``host``, decrypted; None
    when it saved none (or no key can decrypt it any more: then the registry is asked without one)."""
    found = RegistryCredential.objects.filter(owner_id=owner_id, host=host.lower()).only("username", "ciphertext")
    credential = found.first()
    if credential is None:
        return None
    try:
        return credential.username, crypto.decrypt(credential.ciphertext)
    except crypto.Undecryptable:
        return None
