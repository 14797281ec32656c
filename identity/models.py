"""Identity's tables: mobile numbers, the SMS codes sent, real-name verifications, trial claims.

Nothing here keeps more than it needs: a code is stored as an HMAC, a real name masked (张*三), an ID
number only as the HMAC that makes "one trial per person" a unique constraint, never in full.
"""

from __future__ import annotations

import os

from django.conf import settings
from django.core.files.storage import FileSystemStorage
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from identity.normalise import phone_mask


class DocumentsStorage(FileSystemStorage):
    """Organisations' licences: under ``IDENTITY_DOCUMENTS_DIR`` (var/), never served as static or media
    files; staff read one through their review page, and it is deleted once they decide. The folder is
    read from settings at each use (not once at start), so a test's own folder is the one written."""

    @property
    def base_location(self):
        return settings.IDENTITY_DOCUMENTS_DIR

    @property
    def location(self):
        return os.path.abspath(self.base_location)


def documents_storage() -> FileSystemStorage:
    return DocumentsStorage()


class PhoneNumber(models.Model):
    """A person's verified mobile number (E.164): they sign in with it and receive codes on it.

    Only a number proven by a code is stored, so every row is verified; one per account, and a number
    on one account at most (it is a log-in name). Moving it to another account deletes this row, but
    its trial claim (``TrialClaim``) stays, so the number never brings a second trial.
    """

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="phone_number")
    number = models.CharField(_("mobile number"), max_length=20, unique=True)
    verified_at = models.DateTimeField()

    def __str__(self) -> str:
        return self.masked

    @property
    def masked(self) -> str:
        return phone_mask(self.number)


class PhoneCode(models.Model):
    """One SMS code sent: its HMAC, what it is for, who asked, when it expires, and its one use.

    ``ip`` and ``device`` (a random cookie) are kept to count texts per address and per browser; the
    rows are the rate limiter's memory, pruned a day after they expire.
    """

    class Purpose(models.TextChoices):
        SIGNUP = "signup", _("sign-up")
        LOGIN = "login", _("log-in")
        ADD = "add", _("adding a number")

    number = models.CharField(max_length=20)
    purpose = models.CharField(max_length=10, choices=Purpose.choices)
    code_hash = models.CharField(max_length=64)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE)
    ip = models.GenericIPAddressField(null=True, blank=True)
    device = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(db_index=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    failed_attempts = models.PositiveSmallIntegerField(default=0)

    class Meta:
        indexes = [
            models.Index(fields=["number", "created_at"], name="identity_code_number_idx"),
            models.Index(fields=["ip", "created_at"], name="identity_code_ip_idx"),
            models.Index(fields=["device", "created_at"], name="identity_code_device_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.get_purpose_display()} code to {phone_mask(self.number)}"


class RealNameVerification(models.Model):
    """A real-name verification (实名认证) of an account: an individual's or an organisation's.

    Individual: checked at once by the provider (``IDENTITY_REAL_NAME_PROVIDER``); only the verdict,
    its reference, the masked name and the HMAC of the ID number (``person_key``) are kept.
    Organisation: the company name and credit code (public registry data) and an uploaded licence that
    staff review; the file is deleted once they decide. An account has at most one that is pending or
    verified; rejected ones stay as history.
    """

    class Kind(models.TextChoices):
        INDIVIDUAL = "individual", _("Individual")
        ORGANISATION = "organisation", _("Organisation")

    class Status(models.TextChoices):
        PENDING = "pending", _("Waiting for review")  # an organisation's document, not yet reviewed
        VERIFIED = "verified", _("Verified")
        REJECTED = "rejected", _("Rejected")

        @property
        def badge(self) -> str:
            return {"pending": "yellow", "verified": "green", "rejected": "red"}[self.value]

    TRANSITIONS = {Status.PENDING: {Status.VERIFIED, Status.REJECTED}, Status.VERIFIED: set(), Status.REJECTED: set()}

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="real_names")
    kind = models.CharField(max_length=12, choices=Kind.choices)
    status = models.CharField(max_length=10, choices=Status.choices)
    masked_name = models.CharField(_("name"), max_length=200)  # 张*三; an organisation's name in full (public)
    credit_code = models.CharField(_("unified social credit code"), max_length=18, blank=True)
    person_key = models.CharField(max_length=80, blank=True)  # "id:" or "org:" and the HMAC of the number or code
    provider = models.CharField(max_length=40, blank=True)
    provider_reference = models.CharField(max_length=100, blank=True)
    document = models.FileField(upload_to="licences/%Y/%m/", storage=documents_storage, blank=True)
    reason = models.CharField(max_length=300, blank=True)  # why it was rejected
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user"], condition=Q(status__in=["pending", "verified"]), name="identity_one_live_real_name"
            )
        ]
        indexes = [models.Index(fields=["status", "created_at"], name="identity_realname_queue_idx")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.masked_name} ({self.get_status_display()})"

    @property
    def status_badge(self) -> str:
        return self.Status(self.status).badge


class TrialClaim(models.Model):
    """A person (a number's or an identity's HMAC) who had the trial credit, and the account that got it.

    The unique key is the guard: two accounts claiming with one number at once both insert, and the
    database lets one through; rows outlive the phone number and the account that made them.
    """

    person_key = models.CharField(max_length=80, unique=True)  # "phone:<hmac>" or "id:<hmac>"
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.person_key.split(":", 1)[0]
