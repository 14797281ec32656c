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
from vault.errors import SecretExists, SecretInvalid, SecretsLimit
from vault.models import NAME_RE, NAME_RULE, RESERVED_NAMES, RESERVED_PREFIXES, Secret


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
