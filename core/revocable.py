"""A credential that ends two ways, by its expiry or by being revoked: API tokens, share links.

``Revocable`` is an abstract model: the two timestamps, the status they give now (REVOKED wins over
EXPIRED: a revoked link stays revoked whatever its expiry said), and the badge a page shows for it.
The status is computed, never stored, so it cannot fall behind the clock.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class Revocable(models.Model):
    class Status(models.TextChoices):
        ACTIVE = "active", _("Active")  # usable now
        EXPIRED = "expired", _("Expired")  # past its expiry; refused
        REVOKED = "revoked", _("Revoked")  # revoked by its owner; refused for good

    STATUS_BADGE = {Status.ACTIVE: "green", Status.EXPIRED: "yellow", Status.REVOKED: "red"}

    expires_at = models.DateTimeField(_("expires"), null=True, blank=True)
    revoked_at = models.DateTimeField(_("revoked"), null=True, blank=True)

    class Meta:
        abstract = True

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
        return self.status(now) == self.Status.ACTIVE
