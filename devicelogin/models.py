from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from accounts.models import APIToken


class DeviceAuthorization(models.Model):
    """One log-in of a command line through the browser.

    The CLI holds ``device_code`` (only its SHA-256 is stored) and polls with it; the user types or
    follows ``user_code`` on the console's page. Status moves only by compare-and-set
    (``devicelogin.services``): pending → approved | denied, approved → redeemed (the token is made
    then, once, and handed to the poller). Past ``expires_at`` a pending one is refused as expired.
    """

    class Status(models.TextChoices):
        PENDING = "pending", _("Waiting for confirmation")  # the CLI polls; no one has confirmed yet
        APPROVED = "approved", _("Confirmed")  # the user confirmed; the CLI's next poll gets a token
        DENIED = "denied", _("Refused")  # the user refused; the CLI stops
        REDEEMED = "redeemed", _("Used")  # the token was handed out; the code is spent

    device_code_digest = models.CharField(max_length=64, unique=True)
    user_code = models.CharField(max_length=9, db_index=True)
    client_name = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    # The access the command line asked for (``gpuctl login --read-only``); the page shows it before approval.
    scope = models.CharField(max_length=8, choices=APIToken.Scope.choices, default=APIToken.Scope.FULL)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.user_code} ({self.status})"

    @property
    def expired(self) -> bool:
        return timezone.now() >= self.expires_at
