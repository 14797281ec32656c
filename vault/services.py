"""Writes of the vault: save (create or replace) and delete a secret. The value is encrypted before it
reaches the database and never returned; a team's changes go into its audit log (by name, never value).

A change reaches running machines at their next start or restart, when their spec is built again.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from teams.models import TeamEvent
from teams.services import team_event_record
from vault import crypto
from vault.errors import CredentialExists, CredentialInvalid, SecretExists, SecretInvalid, SecretsLimit
from vault.models import HOST_RE, NAME_RE, NAME_RULE, RESERVED_NAMES, RESERVED_PREFIXES, RegistryCredential, Secret


def secret_name_check(name: str) -> str:
    """``name`` if it can be a secret's name; ``SecretInvalid`` (field ``name``) saying why otherwise."""
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise SecretInvalid(str(NAME_RULE), field="name")
    if name in RESERVED_NAMES or name.startswith(RESERVED_PREFIXES):
        raise SecretInvalid(
            _("%(name)s is reserved for the machine's own settings: choose another name.") % {"name": name},
            field="name",
        )
    return name


def _value_check(value: str) -> bytes:
    if not isinstance(value, str) or value == "":
        raise SecretInvalid(_("A secret needs a value."), field="value")
    data = value.encode()
    if len(data) > settings.VAULT_VALUE_MAX_BYTES:
        raise SecretInvalid(
            _("A secret's value may be at most %(limit)d bytes.") % {"limit": settings.VAULT_VALUE_MAX_BYTES},
            field="value",
        )
    if "\x00" in value:
        raise SecretInvalid(_("A secret's value cannot contain a NUL character."), field="value")
    return data


def secret_set(*, owner, actor, name: str, value: str, create_only: bool = False) -> tuple[Secret, bool]:
    """Save ``value`` under ``name`` for account ``owner``: a new secret, or a new value for the one of
    that name (unless ``create_only``: then ``SecretExists``). Returns ``(secret, created)``.

    Under a lock of the owner's row, so two saves of one new name make one secret, and the count
    limit holds under concurrent creates."""
    secret_name_check(name)
    data = _value_check(value)
    ciphertext = crypto.encrypt(value)
    with transaction.atomic():
        get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
        secret = Secret.objects.select_for_update().filter(owner=owner, name=name).first()
        created = secret is None
        if created:
            if Secret.objects.filter(owner=owner).count() >= settings.VAULT_MAX_SECRETS:
                raise SecretsLimit(
                    _("An account keeps at most %(limit)d secrets: delete one first.")
                    % {"limit": settings.VAULT_MAX_SECRETS}
                )
            try:
                with transaction.atomic():
                    secret = Secret.objects.create(
                        owner=owner, created_by=actor, name=name, ciphertext=ciphertext, size=len(data)
                    )
            except IntegrityError as exc:  # pragma: no cover (the owner's lock serialises creates)
                raise SecretExists(_("You already have a secret called %(name)s.") % {"name": name}) from exc
        elif create_only:
            raise SecretExists(
                _("You already have a secret called %(name)s: replace its value instead.") % {"name": name},
                field="name",
            )
        else:
            secret.ciphertext, secret.size, secret.updated_at = ciphertext, len(data), timezone.now()
            secret.save(update_fields=["ciphertext", "size", "updated_at"])
        team_event_record(
            account=owner,
            actor=actor,
            action=TeamEvent.Action.SECRET_SAVED,
            target=name,
            details={"created": created},
        )
    return secret, created


def secret_delete(*, secret: Secret, actor) -> None:
    """Delete ``secret``; the instances that used it boot without it from their next start."""
    with transaction.atomic():
        Secret.objects.filter(pk=secret.pk).delete()
        team_event_record(
            account=secret.owner_id, actor=actor, action=TeamEvent.Action.SECRET_DELETED, target=secret.name
        )


# --- Registry credentials ------------------------------------------------------------------------------


def _credential_fields_check(*, host: str, username: str, password: str) -> str:
    host = (host or "").strip().lower()
    if not HOST_RE.match(host) or len(host) > 255:
        raise CredentialInvalid(
            _("A registry is its host name, with a port if it has one (registry.example.com:5000)."), field="host"
        )
    if not isinstance(username, str) or not username.strip() or len(username) > 255 or ":" in username:
        raise CredentialInvalid(_("A user name is 1 to 255 characters, without a colon."), field="username")
    if not isinstance(password, str) or not password or len(password.encode()) > 8192 or "\x00" in password:
        raise CredentialInvalid(_("A password or token is 1 to 8192 bytes."), field="password")
    return host


def registry_credential_set(
    *, owner, actor, host: str, username: str, password: str, create_only: bool = False
) -> tuple[RegistryCredential, bool]:
    """Save how ``owner`` logs in to the registry ``host``: a new credential, or a new user name and
    password for the one of that host (unless ``create_only``: then ``CredentialExists``). The password
    is encrypted before it reaches the database. Returns ``(credential, created)``."""
    host = _credential_fields_check(host=host, username=username, password=password)
    ciphertext = crypto.encrypt(password)
    with transaction.atomic():
        get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
        credential = RegistryCredential.objects.select_for_update().filter(owner=owner, host=host).first()
        created = credential is None
        if created:
            if RegistryCredential.objects.filter(owner=owner).count() >= settings.VAULT_MAX_SECRETS:
                raise SecretsLimit(
                    _("An account keeps at most %(limit)d registry credentials: delete one first.")
                    % {"limit": settings.VAULT_MAX_SECRETS}
                )
            credential = RegistryCredential.objects.create(
                owner=owner, created_by=actor, host=host, username=username.strip(), ciphertext=ciphertext
            )
        elif create_only:
            raise CredentialExists(
                _("You already have a credential for %(host)s: replace it instead.") % {"host": host}, field="host"
            )
        else:
            credential.username, credential.ciphertext = username.strip(), ciphertext
            credential.updated_at = timezone.now()
            credential.save(update_fields=["username", "ciphertext", "updated_at"])
        team_event_record(
            account=owner,
            actor=actor,
            action=TeamEvent.Action.SECRET_SAVED,
            target=f"registry {host}",
            details={"created": created, "registry": host},
        )
    return credential, created


def registry_credential_delete(*, credential: RegistryCredential, actor) -> None:
    """Delete ``credential``: imports and pulls from its registry go without a log-in from now on."""
    with transaction.atomic():
        RegistryCredential.objects.filter(pk=credential.pk).delete()
        team_event_record(
            account=credential.owner_id,
            actor=actor,
            action=TeamEvent.Action.SECRET_DELETED,
            target=f"registry {credential.host}",
        )
