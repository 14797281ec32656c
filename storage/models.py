"""Shared volumes: storage a user creates in a region, attaches to instances there, and pays per GB-day."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.status import EventReasonMixin, StatusDisplayMixin

# Volumes are sized in GiB, as clouds size their disks: a "GB" of size is 2**30 bytes.
BYTES_PER_GB = 1024**3


class Volume(StatusDisplayMixin, models.Model):
    """A volume in one region, created by that region's backend (``volume_create``) under its UUID.

    ``status`` only changes through ``storage.services.volume_transition`` (compare-and-set, an event
    row and the billing meter, in one transaction). ``size_gb`` is what the provider has and what is
    billed; a resize in flight records its target in ``resize_to_gb``. ``used_bytes`` is what its files
    took at ``usage_checked_at`` (refreshed periodically), None until first measured.
    """

    class Status(models.TextChoices):
        CREATING = "creating", _("Creating")  # recorded; a worker has the provider create it
        AVAILABLE = "available", _("Available")  # exists and is billed; may be attached, resized, deleted
        RESIZING = "resizing", _("Resizing")  # growing at the provider; still usable and billed at its old size
        DELETING = "deleting", _("Deleting")  # billing closed; the provider deletes it with its files
        DELETED = "deleted", _("Deleted")  # gone for good
        FAILED = "failed", _("Failed")  # could not be created (nothing was billed) or deleted (billing closed)

    BADGE_COLOURS = {
        Status.CREATING: "blue",
        Status.AVAILABLE: "green",
        Status.RESIZING: "yellow",
        Status.DELETING: "yellow",
        Status.DELETED: "",
        Status.FAILED: "red",
    }
    # States that end with a worker's action: shown with a spinner, re-driven by the periodic task.
    BUSY = (Status.CREATING, Status.RESIZING, Status.DELETING)
    # States in which the volume exists at the provider and can be mounted.
    MOUNTABLE = (Status.AVAILABLE, Status.RESIZING)
    # States that count against the user's storage quota.
    HOLDING = (Status.CREATING, Status.AVAILABLE, Status.RESIZING)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="volumes")
    # The person who created it: in a team (``owner`` is the team's account) they may change it as its
    # admins may (``teams.access``). The owner for a personal volume; null once that person is gone.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("created by"),
    )
    region = models.ForeignKey("instances.Region", on_delete=models.PROTECT, related_name="volumes")
    name = models.CharField(_("name"), max_length=64)
    size_gb = models.PositiveIntegerField(_("size (GB)"))
    resize_to_gb = models.PositiveIntegerField(_("resizing to (GB)"), null=True, blank=True)
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.CREATING)
    # A stored message (core.messages): translated into the reader's language when shown.
    status_reason = models.TextField(_("reason"), blank=True)
    backend_alias = models.CharField(_("backend"), max_length=32)
    backend_state = models.JSONField(_("backend state"), default=dict, blank=True)
    used_bytes = models.BigIntegerField(_("used (bytes)"), null=True, blank=True)
    usage_checked_at = models.DateTimeField(_("usage checked"), null=True, blank=True)
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    status_changed_at = models.DateTimeField(_("status changed"), default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("volume")
        verbose_name_plural = _("volumes")
        indexes = [
            models.Index(fields=["owner", "-created_at"], name="storage_volume_owner_recent"),
            models.Index(fields=["status"], name="storage_volume_status"),
        ]
        constraints = [
            models.CheckConstraint(condition=models.Q(size_gb__gte=1), name="storage_volume_size_positive"),
            # Names tell a user's volumes apart on the pages and in mount lists.
            models.UniqueConstraint(
                fields=["owner", "name"],
                condition=~models.Q(status__in=("deleted", "failed")),
                name="storage_volume_unique_live_name",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def size_bytes(self) -> int:
        return self.size_gb * BYTES_PER_GB

    @property
    def used_percent(self) -> float | None:
        """Display only: how full it is (may pass 100 on a backend that cannot cap a volume)."""
        if self.used_bytes is None:
            return None
        return 100 * self.used_bytes / (self.size_gb * BYTES_PER_GB)

    def can_resize(self) -> bool:
        return self.status == self.Status.AVAILABLE

    def can_attach(self) -> bool:
        return self.status in self.MOUNTABLE

    def can_delete(self) -> bool:
        return self.status in (self.Status.AVAILABLE, self.Status.FAILED)


class VolumeEvent(EventReasonMixin, models.Model):
    """One change of a volume's status, with why: its history, and the clock its meter follows."""

    volume = models.ForeignKey(Volume, on_delete=models.CASCADE, related_name="events")
    old = models.CharField(_("from"), max_length=16, blank=True)
    new = models.CharField(_("to"), max_length=16)
    reason = models.TextField(_("reason"), blank=True)  # a stored message (core.messages)
    created_at = models.DateTimeField(_("time"), default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name = _("volume event")
        verbose_name_plural = _("volume events")

    def __str__(self) -> str:
        return f"{self.old or '∅'} → {self.new}"

    @property
    def new_label(self) -> str:
        return Volume.Status(self.new).label if self.new in Volume.Status.values else self.new

    @property
    def badge_colour(self) -> str:
        return Volume.BADGE_COLOURS.get(self.new, "")


class VolumeAttachment(models.Model):
    """Volume ``volume`` mounted on ``instance`` at ``mount_path``: applied at the instance's next boot
    (launch, start, restart), since a machine's mounts are set when it boots.

    A detach requested while the instance runs sets ``detach_requested_at``: the volume stays mounted
    there until the next boot (which drops the row) or stop. The rules (one writer unless the backend
    shares writes, same region, paths that do not collide) are checked by ``storage.services.volume_attach``
    under the volume's row lock; the constraints below are the last line of defence.
    """

    class Mode(models.TextChoices):
        READ_WRITE = "rw", _("Read-write")  # the one writer
        READ_ONLY = "ro", _("Read-only")  # any number of readers, beside a writer or not
        SHARED_READ_WRITE = "shared-rw", _("Shared read-write")  # several writers, where the backend allows

    volume = models.ForeignKey(Volume, on_delete=models.CASCADE, related_name="attachments")
    instance = models.ForeignKey("instances.Instance", on_delete=models.CASCADE, related_name="volume_attachments")
    mount_path = models.CharField(_("mount path"), max_length=128)
    mode = models.CharField(_("mode"), max_length=16, choices=Mode.choices, default=Mode.READ_WRITE)
    created_at = models.DateTimeField(_("attached"), default=timezone.now)
    detach_requested_at = models.DateTimeField(_("detach requested"), null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name = _("volume attachment")
        verbose_name_plural = _("volume attachments")
        constraints = [
            models.UniqueConstraint(fields=["volume", "instance"], name="storage_attachment_once_per_instance"),
            models.UniqueConstraint(
                fields=["instance", "mount_path"],
                condition=models.Q(detach_requested_at__isnull=True),
                name="storage_attachment_unique_path",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.volume} at {self.mount_path} ({self.mode})"

    @property
    def read_only(self) -> bool:
        return self.mode == self.Mode.READ_ONLY
