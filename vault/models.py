"""A secret: a named value of a user's or a team's, kept encrypted (``vault.crypto``)."""

from __future__ import annotations

import re
import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

# An environment variable's name, as POSIX shells accept one, in capitals: the secret becomes the file
# /run/console-secrets/<NAME> and, when asked, the variable NAME, so one name must suit both.
NAME_PATTERN = r"^[A-Z_][A-Z0-9_]{0,63}$"
NAME_RE = re.compile(NAME_PATTERN)
# What a bad name is told, in the API's 400 and on the page.
NAME_RULE = _(
    "A secret's name is an environment variable's name: capital letters, digits and _, "
    "not starting with a digit, at most 64 characters (for example WANDB_API_KEY)."
)

# Names the machine's own start-up sets or relies on: a secret by one of these would break logging in
# or the servers (PATH, HOME), load code into every process (LD_PRELOAD) or pose as the console's
# settings (CONSOLE_*, read by the image contract's start script).
RESERVED_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "PWD",
        "TERM",
        "LANG",
        "IFS",
        "ENV",
        "BASH_ENV",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_VISIBLE_DEVICES",
    }
)
RESERVED_PREFIXES = ("CONSOLE_", "LD_", "JUPYTER_", "SSH_")


class Secret(models.Model):
    """A value its owner keeps out of their notebooks and images, by a name unique per owner.

    ``owner`` is an account: a person's own, or a team's (``Team.account``), as with volumes, so team
    secrets need no model of their own. ``ciphertext`` is the Fernet token of the value: the value
    itself is never stored, logged or shown again after it is saved; only an instance's boot decrypts
    it (``vault.selectors.secret_values_for_boot``), to hand it to the provider in the machine's spec.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="vault_secrets")
    # The person who saved it: in a team they may replace or delete it as its admins may (teams.access).
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("created by"),
    )
    name = models.CharField(_("name"), max_length=64)
    ciphertext = models.TextField(editable=False)
    # Bytes of the value (UTF-8): shown beside the name, so an owner can tell a value was saved whole.
    size = models.PositiveIntegerField(_("size (bytes)"), default=0)
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    updated_at = models.DateTimeField(_("updated"), default=timezone.now)

    class Meta:
        ordering = ["name"]
        verbose_name = _("secret")
        verbose_name_plural = _("secrets")
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="vault_secret_name_unique_per_owner"),
            models.CheckConstraint(
                condition=models.Q(name__regex=NAME_PATTERN), name="vault_secret_name_is_a_variable_name"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:  # never the ciphertext either: it is the value to whoever has the key
        return f"<Secret {self.name} of account {self.owner_id}>"


# A registry's host as an image reference names it: a DNS name or an address, with an optional port.
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
HOST_PATTERN = rf"^(?:localhost|{_LABEL}(?:\.{_LABEL})+)(?::[0-9]{{1,5}})?$"
HOST_RE = re.compile(HOST_PATTERN)


class RegistryCredential(models.Model):
    """How an account logs in to a private container registry, to import ("bring your own") and pull
    its images: a user name and a password or token for one ``host`` (``registry.example.com:5000``).

    One per host and owner (a person's account, or a team's, as secrets). ``ciphertext`` is the Fernet
    token of the password (``vault.crypto``): never shown again after it is saved; only an image's
    import and an instance's pull decrypt it (``vault.selectors.registry_login_for``).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="registry_credentials")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("created by"),
    )
    host = models.CharField(_("registry"), max_length=255)
    username = models.CharField(_("user name"), max_length=255)
    ciphertext = models.TextField(editable=False)
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    updated_at = models.DateTimeField(_("updated"), default=timezone.now)

    class Meta:
        ordering = ["host"]
        verbose_name = _("registry credential")
        verbose_name_plural = _("registry credentials")
        constraints = [
            models.UniqueConstraint(fields=["owner", "host"], name="vault_registry_credential_one_per_host"),
        ]

    def __str__(self) -> str:
        return f"{self.username}@{self.host}"

    def __repr__(self) -> str:
        return f"<RegistryCredential {self.host} of account {self.owner_id}>"
