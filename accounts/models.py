"""People and their credentials: the user, SSH public keys, API tokens, and the security log of each."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AbstractUser, BaseUserManager
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from accounts.useragent import user_agent_describe
from core.appendonly import AppendOnlyModel
from core.revocable import Revocable


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
    # The API's requests a minute for all of this account's credentials together (its sessions and every
    # token): staff raise it for a heavy user, or lower it for an abusive one. Empty: API_RATE_PER_MIN.
    api_rate_per_min = models.PositiveIntegerField(
        _("API requests a minute"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=_("For all of this account's sessions and API tokens together; empty: the console's default."),
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


class APIToken(Revocable):
    """A bearer token for the REST API.

    The token is shown once, at creation; only its SHA-256 digest is stored (the token is 256 random
    bits, so a fast hash is enough: there is nothing to brute-force). ``prefix`` is the token's first
    characters, stored in clear so the user can tell tokens apart in the list.
    """

    class Scope(models.TextChoices):
        FULL = "full", _("Full access")  # everything its owner may do through the API
        READ = "read", _("Read-only")  # GET, HEAD and OPTIONS only: it cannot launch, stop or spend

    SCOPE_BADGE = {Scope.FULL: "indigo", Scope.READ: "blue"}

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(_("name"), max_length=64)
    prefix = models.CharField(_("prefix"), max_length=16, db_index=True)
    digest = models.CharField(max_length=64, unique=True)
    # Chosen at creation, never changed: a token that needs more is replaced, not widened.
    scope = models.CharField(_("access"), max_length=8, choices=Scope.choices, default=Scope.FULL)
    # The team the token acts in (``request.principal`` is the team's account), or none: personal. Chosen
    # at creation, never changed; the membership is checked on every request (``teams.authentication``).
    team = models.ForeignKey(
        "teams.Team", null=True, blank=True, on_delete=models.CASCADE, related_name="api_tokens", verbose_name=_("team")
    )
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True)
    # expires_at, revoked_at and the status they give: core.revocable.Revocable
    # A limit of the token's own, within its account's (``accounts.throttles``): a CI job's token that
    # loops cannot use up the requests its owner's other scripts and pages need. Empty: the account's.
    rate_per_min = models.PositiveIntegerField(
        _("requests a minute"), null=True, blank=True, validators=[MinValueValidator(1)]
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("API token")
        verbose_name_plural = _("API tokens")

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def scope_badge(self) -> str:
        return self.SCOPE_BADGE.get(self.scope, "")

    @property
    def read_only(self) -> bool:
        return self.scope == self.Scope.READ


class SecurityEvent(AppendOnlyModel):
    """One entry of a user's personal security log: a log-in, a refused log-in, a credential changed.

    Append-only (``core.appendonly``): the log is the user's evidence of what happened to their
    account, so nothing edits or deletes a row; deleting the user takes their log with them.
    ``ip`` and ``user_agent`` are the request's that caused it (empty when no request did, e.g. a
    change made from a shell); ``details`` holds what tells one event from another (the key's name
    and fingerprint, the token's name and access, the old and new address), never a secret.
    """

    class Action(models.TextChoices):
        LOGIN = "login", _("Logged in")
        LOGIN_FAILED = "login_failed", _("Log-in failed")  # a wrong password for this account's address
        LOGOUT = "logout", _("Logged out")
        PASSWORD_CHANGED = "password_changed", _("Password changed")  # changed, or set for the first time
        PASSWORD_RESET = "password_reset", _("Password reset")  # through the e-mailed link
        EMAIL_CHANGED = "email_changed", _("E-mail address changed")  # the primary (log-in) address
        SSH_KEY_ADDED = "ssh_key_added", _("SSH key added")
        SSH_KEY_REMOVED = "ssh_key_removed", _("SSH key removed")
        TOKEN_CREATED = "token_created", _("API token created")  # on the page, the API or by a device log-in
        TOKEN_REVOKED = "token_revoked", _("API token revoked")
        DEVICE_LOGIN_APPROVED = "device_login_approved", _("Device log-in approved")  # a command line's
        # Second factors (allauth.mfa; details: "method" totp / recovery_codes / webauthn, a passkey's "name")
        SECOND_FACTOR_ADDED = "second_factor_added", _("Second factor added")
        SECOND_FACTOR_REMOVED = "second_factor_removed", _("Second factor removed")
        RECOVERY_CODES_GENERATED = "recovery_codes_generated", _("New recovery codes generated")
        # At a log-in (or a passkey's own log-in, "passwordless"), or to confirm a change ("reauthenticated").
        SECOND_FACTOR_USED = "second_factor_used", _("Second factor used")
        RECOVERY_CODE_USED = "recovery_code_used", _("Recovery code used")  # details: "left", the codes unused
        SECOND_FACTOR_FAILED = "second_factor_failed", _("Wrong second-factor code")

    # The badge colour of each action: red where someone may be trying the account.
    ACTION_BADGE = {
        Action.LOGIN_FAILED: "red",
        Action.PASSWORD_RESET: "yellow",
        Action.EMAIL_CHANGED: "yellow",
        Action.SECOND_FACTOR_ADDED: "green",
        Action.SECOND_FACTOR_REMOVED: "yellow",
        Action.RECOVERY_CODES_GENERATED: "yellow",
        Action.RECOVERY_CODE_USED: "yellow",
        Action.SECOND_FACTOR_FAILED: "red",
    }

    USER_AGENT_MAX = 256  # enough to tell browsers apart; longer strings are cut, not refused

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="security_events")
    action = models.CharField(_("action"), max_length=32, choices=Action.choices)
    ip = models.GenericIPAddressField(_("IP address"), null=True, blank=True)
    user_agent = models.CharField(_("user agent"), max_length=USER_AGENT_MAX, blank=True)
    details = models.JSONField(_("details"), default=dict, blank=True)
    created_at = models.DateTimeField(_("time"), default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("security event")
        verbose_name_plural = _("security events")
        indexes = [models.Index(fields=["user", "-created_at"], name="accounts_secevent_user_time")]

    def __str__(self) -> str:
        return f"{self.user_id} {self.action} {self.created_at:%Y-%m-%d %H:%M:%S}"

    @property
    def badge(self) -> str:
        return self.ACTION_BADGE.get(self.action, "")

    @property
    def device(self) -> str:
        """The browser or program and its system, in a few words ("Firefox on Linux")."""
        return user_agent_describe(self.user_agent)
