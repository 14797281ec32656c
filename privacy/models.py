"""Legal texts and their acceptances, data exports, and deletion requests.

Nothing here holds personal data beyond what the row is about: an acceptance names its user and the IP
it came from (proof of consent), an export holds the user's own data until it expires, and a deletion
request outlives its user's personal data with only a keyed hash of the address.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import get_language
from django.utils.translation import gettext_lazy as _


class DocumentKind(models.TextChoices):
    TERMS = "terms", _("Terms of service")
    PRIVACY = "privacy", _("Privacy policy")


class DocumentVersion(models.Model):
    """One version of a legal text, in English and Simplified Chinese.

    A draft (``published_at`` empty) is edited by staff; publishing fixes the text for good (an edit
    after that is a new version) and asks every user to accept it at their next request. The version in
    force for a kind is the published one with the highest number.
    """

    kind = models.CharField(_("document"), max_length=16, choices=DocumentKind.choices)
    version = models.PositiveIntegerField(_("version"))
    title_en = models.CharField(_("title (English)"), max_length=200)
    title_zh = models.CharField(_("title (Chinese)"), max_length=200)
    body_en = models.TextField(_("text (English)"))
    body_zh = models.TextField(_("text (Chinese)"))
    # What changed since the last version, shown on the page that asks users to accept it again.
    changes_en = models.TextField(_("what changed (English)"), blank=True)
    changes_zh = models.TextField(_("what changed (Chinese)"), blank=True)
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    published_at = models.DateTimeField(_("published"), null=True, blank=True, db_index=True)
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["kind", "-version"]
        verbose_name = _("legal document version")
        verbose_name_plural = _("legal document versions")
        constraints = [models.UniqueConstraint(fields=["kind", "version"], name="privacy_document_version_unique")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} v{self.version}"

    @property
    def is_published(self) -> bool:
        return self.published_at is not None

    def _localized(self, field: str) -> str:
        zh = (get_language() or "").lower().startswith("zh")
        return getattr(self, f"{field}_zh" if zh else f"{field}_en") or getattr(self, f"{field}_en")

    @property
    def title(self) -> str:
        return self._localized("title")

    @property
    def body(self) -> str:
        return self._localized("body")

    @property
    def changes(self) -> str:
        return self._localized("changes")


class Acceptance(models.Model):
    """A user accepted one version of one document: when, and from which address (proof of consent)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="legal_acceptances")
    document = models.ForeignKey(DocumentVersion, on_delete=models.PROTECT, related_name="acceptances")
    accepted_at = models.DateTimeField(_("accepted"), default=timezone.now)
    ip = models.GenericIPAddressField(_("IP address"), null=True, blank=True)

    class Meta:
        ordering = ["-accepted_at", "-id"]
        verbose_name = _("acceptance")
        verbose_name_plural = _("acceptances")
        constraints = [models.UniqueConstraint(fields=["user", "document"], name="privacy_acceptance_unique")]

    def __str__(self) -> str:
        return f"{self.user_id} accepted {self.document_id} at {self.accepted_at:%Y-%m-%d %H:%M}"


class DataExport(models.Model):
    """A ZIP of a user's data, built by a worker, downloadable by its user until it expires.

    One export per user may be waiting or building at a time (a partial unique index), so a user
    cannot queue many; the ZIP is kept in the row (as invoices' PDFs are) so web and worker need no
    shared disk, and is dropped when it expires.
    """

    class Status(models.TextChoices):
        PENDING = "pending", _("Waiting")  # asked for; the task has not started it
        BUILDING = "building", _("Building")  # a worker is writing it
        READY = "ready", _("Ready")  # the ZIP is here to download until expires_at
        FAILED = "failed", _("Failed")  # too large or an error: ``error`` says why
        EXPIRED = "expired", _("Expired")  # past expires_at: the ZIP is gone

    STATUS_BADGE = {
        Status.PENDING: "yellow",
        Status.BUILDING: "blue",
        Status.READY: "green",
        Status.FAILED: "red",
        Status.EXPIRED: "",
    }
    ACTIVE = (Status.PENDING, Status.BUILDING)

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="data_exports")
    status = models.CharField(_("status"), max_length=10, choices=Status.choices, default=Status.PENDING)
    created_at = models.DateTimeField(_("asked for"), default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)
    expires_at = models.DateTimeField(_("expires"), null=True, blank=True)
    content = models.BinaryField(null=True, blank=True, editable=False)
    size_bytes = models.PositiveBigIntegerField(_("size"), default=0)
    sha256 = models.CharField(max_length=64, blank=True)
    error = models.CharField(_("error"), max_length=300, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("data export")
        verbose_name_plural = _("data exports")
        constraints = [
            models.UniqueConstraint(
                fields=["user"],
                condition=models.Q(status__in=["pending", "building"]),
                name="privacy_one_active_export_per_user",
            )
        ]

    def __str__(self) -> str:
        return f"export {self.pk} of {self.user_id} ({self.status})"

    @property
    def badge(self) -> str:
        return self.STATUS_BADGE.get(self.status, "")

    @property
    def filename(self) -> str:
        return f"console-data-{self.user_id}-{self.created_at:%Y%m%d-%H%M%S}.zip"


class DeletionRequest(models.Model):
    """A user's request to delete their account: the audit record that outlives their personal data.

    ``scheduled`` during the warning period (the user may cancel), then ``releasing`` while their
    machines, volumes and deployments are let go, then ``completed`` once their personal data is
    anonymised. The record keeps no personal data: the user row it points to is anonymised, and
    ``email_hash`` (HMAC-SHA256 of the address under ``PRIVACY_HASH_KEY``) lets staff answer "was this
    address's account deleted?" without storing the address.
    """

    class Status(models.TextChoices):
        SCHEDULED = "scheduled", _("Scheduled")  # within the warning period; cancellable
        CANCELLED = "cancelled", _("Cancelled")  # the user kept their account
        RELEASING = "releasing", _("Releasing resources")  # due: machines, volumes, deployments going
        COMPLETED = "completed", _("Completed")  # resources gone, personal data anonymised

    STATUS_BADGE = {
        Status.SCHEDULED: "yellow",
        Status.CANCELLED: "",
        Status.RELEASING: "blue",
        Status.COMPLETED: "green",
    }
    OPEN = (Status.SCHEDULED, Status.RELEASING)

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="deletion_requests")
    status = models.CharField(_("status"), max_length=10, choices=Status.choices, default=Status.SCHEDULED)
    email_hash = models.CharField(_("address hash"), max_length=64, db_index=True)
    requested_at = models.DateTimeField(_("requested"), default=timezone.now)
    due_at = models.DateTimeField(_("due"))
    cancelled_at = models.DateTimeField(_("cancelled"), null=True, blank=True)
    started_at = models.DateTimeField(_("started"), null=True, blank=True)
    completed_at = models.DateTimeField(_("completed"), null=True, blank=True)
    # What the deletion did (counts only: instances released, volumes deleted, rows anonymised).
    summary = models.JSONField(default=dict, blank=True)
    last_error = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-requested_at", "-id"]
        verbose_name = _("deletion request")
        verbose_name_plural = _("deletion requests")
        constraints = [
            models.UniqueConstraint(
                fields=["user"],
                condition=models.Q(status__in=["scheduled", "releasing"]),
                name="privacy_one_open_deletion_per_user",
            )
        ]

    def __str__(self) -> str:
        return f"deletion {self.pk} of {self.user_id} ({self.status})"

    @property
    def badge(self) -> str:
        return self.STATUS_BADGE.get(self.status, "")
