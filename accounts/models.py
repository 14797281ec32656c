"""People and their credentials: the user, SSH public keys, API tokens."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AbstractUser, BaseUserManager
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class UserManager(BaseUserManager):
    use_in_migrations = True

    def _create_user(self, email: str, password: str | None, **extra):
        if not email:
            raise ValueError("An e-mail address is required.")
        user = self.model(email=self.normalize_email(email).lower(), **extra)
        user.set_password(password)
        user.save(using=self._db)
        return user

    def create_user(self, email: str, password: str | None = None, **extra):
        extra.setdefault("is_staff", False)
        extra.setdefault("is_superuser", False)
        return self._create_user(email, password, **extra)

    def create_superuser(self, email: str, password: str | None = None, **extra):
        extra.setdefault("is_staff", True)
        extra.setdefault("is_superuser", True)
        return self._create_user(email, password, **extra)


class User(AbstractUser):
    """A console user. The e-mail address is the login; there is no separate user name."""

    username = None
    email = models.EmailField(_("e-mail address"), unique=True)
    display_name = models.CharField(_("display name"), max_length=80, blank=True)
    # The language of the console's pages after log-in and of everything sent to the user (e-mail,
    # notifications), also by workers, which have no request to take it from.
    language = models.CharField(
        _("language"), max_length=16, choices=settings.LANGUAGES, default=settings.LANGUAGE_CODE
    )

    USERNAME_FIELD = "email"
    REQUIRED_FIELDS: list[str] = []

    objects = UserManager()

    class Meta:
        verbose_name = _("user")
        verbose_name_plural = _("users")
        constraints = [models.UniqueConstraint(Lower("email"), name="accounts_user_email_ci_unique")]

    def __str__(self) -> str:
        return self.email

    @property
    def short_name(self) -> str:
        return self.display_name or self.email.split("@", 1)[0]


class SSHKey(models.Model):
    """A user's SSH public key, installed as an authorized key on the instances they choose it for.

    Only the public half is ever stored. The fingerprint (SHA256, as ``ssh-keygen -l`` prints it) is
    unique per user so the same key cannot be added twice under two names.
    """

    class KeyType(models.TextChoices):
        ED25519 = "ssh-ed25519", "Ed25519"
        ECDSA = "ecdsa", "ECDSA"
        RSA = "ssh-rsa", "RSA"

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="ssh_keys")
    name = models.CharField(_("name"), max_length=64)
    public_key = models.TextField(_("public key"))
    key_type = models.CharField(_("type"), max_length=16, choices=KeyType.choices)
    bits = models.PositiveIntegerField(_("bits"))
    fingerprint = models.CharField(_("fingerprint"), max_length=64)
    created_at = models.DateTimeField(_("added"), default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("SSH key")
        verbose_name_plural = _("SSH keys")
        constraints = [
            models.UniqueConstraint(fields=["user", "fingerprint"], name="accounts_sshkey_unique_fingerprint"),
            models.UniqueConstraint(fields=["user", "name"], name="accounts_sshkey_unique_name"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.fingerprint})"


class APIToken(models.Model):
    """A bearer token for the REST API.

    The token is shown once, at creation; only its SHA-256 digest is stored (the token is 256 random
    bits, so a fast hash is enough: there is nothing to brute-force). ``prefix`` is the token's first
    characters, stored in clear so the user can tell tokens apart in the list.
    """

    class Status(models.TextChoices):
        ACTIVE = "active", _("Active")  # usable now
        EXPIRED = "expired", _("Expired")  # past its expiry; refused
        REVOKED = "revoked", _("Revoked")  # revoked by its owner; refused for good

    STATUS_BADGE = {Status.ACTIVE: "green", Status.EXPIRED: "yellow", Status.REVOKED: "red"}

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(_("name"), max_length=64)
    prefix = models.CharField(_("prefix"), max_length=16, db_index=True)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    expires_at = models.DateTimeField(_("expires"), null=True, blank=True)
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True)
    revoked_at = models.DateTimeField(_("revoked"), null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("API token")
        verbose_name_plural = _("API tokens")

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    def status(self, now=None) -> Status:
        now = now or timezone.now()
        if self.revoked_at is not None:
            return self.Status.REVOKED
        if self.expires_at is not None and self.expires_at <= now:
            return self.Status.EXPIRED
        return self.Status.ACTIVE

    @property
    def status_now(self) -> Status:
        return self.status()

    @property
    def status_badge(self) -> str:
        return self.STATUS_BADGE[self.status()]

    def is_active(self, now=None) -> bool:
        now = now or timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)
