"""One row per connection through the SSH gateway: who, to which instance, from where, for how long."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class GatewaySession(models.Model):
    """A connection a user signed in on with a key of their account (strangers are refused before that,
    and only logged to the process log: a scanner must not be able to fill this table).

    ``outcome`` says whether the gateway let it through to the instance; a refused one keeps the message
    the user was shown in ``reason``. ``ended_at`` is empty while the connection is open (or when the
    process died under it).
    """

    class Outcome(models.TextChoices):
        CONNECTED = "connected", _("Connected")  # passed through to the instance
        REFUSED = "refused", _("Refused")  # signed in, but not let through (another's, released, stopped…)
        # let through, but the instance's sshd showed another host key than the one pinned: not joined
        HOST_KEY_CHANGED = "host_key_changed", _("Host key changed")

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="gateway_sessions"
    )
    instance = models.ForeignKey(
        "instances.Instance", null=True, blank=True, on_delete=models.SET_NULL, related_name="gateway_sessions"
    )
    login = models.CharField(_("logged in as"), max_length=128)  # what the user typed before the @
    key_fingerprint = models.CharField(_("key fingerprint"), max_length=64)
    peer = models.CharField(_("from"), max_length=64)  # the client's address and port
    outcome = models.CharField(_("outcome"), max_length=16, choices=Outcome.choices)
    reason = models.TextField(_("reason"), blank=True)
    started_at = models.DateTimeField(_("started"), default=timezone.now, db_index=True)
    ended_at = models.DateTimeField(_("ended"), null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        verbose_name = _("gateway session")
        verbose_name_plural = _("gateway sessions")
        indexes = [models.Index(fields=["instance", "-started_at"], name="gateway_session_instance")]

    def __str__(self) -> str:
        return f"{self.login} from {self.peer}"

    @property
    def duration(self) -> timedelta | None:
        return None if self.ended_at is None else self.ended_at - self.started_at


class InstanceHostKey(models.Model):
    """The host key of an instance's sshd as the gateway (or the files API) first saw it: trust on first
    use, one per instance. Every later onward connection must meet the same key, or it is refused (a
    machine in the middle on the provider's network, or a disk swapped under the instance).

    The providers keep the key with the instance's disk (the local runtime and Slurm in its directory),
    so a stop and start meets the same key. Staff delete the row (admin) to trust a new one on purpose.
    """

    instance = models.OneToOneField(
        "instances.Instance", primary_key=True, on_delete=models.CASCADE, related_name="gateway_host_key"
    )
    key = models.TextField(_("host key"))  # the OpenSSH public key line ("ssh-ed25519 AAAA…")
    fingerprint = models.CharField(_("fingerprint"), max_length=64)  # SHA256:…, what a message shows
    pinned_at = models.DateTimeField(_("pinned"), default=timezone.now)

    class Meta:
        verbose_name = _("instance host key")
        verbose_name_plural = _("instance host keys")

    def __str__(self) -> str:
        return f"{self.instance_id}: {self.fingerprint}"
