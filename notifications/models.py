"""What the console told a user: the inbox, where each kind goes, and the user's signed webhooks.

Users are referred to only through ``settings.AUTH_USER_MODEL`` and their attributes (``email``,
``language``): this app sits below accounts, so billing, instances and every app above may call it.
"""

from __future__ import annotations

import secrets
import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class Kind(models.TextChoices):
    """Everything the console tells a user, one value per kind of news (preferences are per kind)."""

    PREEMPTED = "preempted", _("Instance preempted")
    RECOVERED = "recovered", _("Instance restarted after preemption")
    START_QUEUE = "start_queue", _("Instance started from the line, or taken out of it")
    INCIDENT_CREDIT = "incident_credit", _("Credit for an interruption")
    IDLE_WARNING = "idle_warning", _("Idle stop coming")
    IDLE_STOPPED = "idle_stopped", _("Stopped while idle")
    LOW_BALANCE = "low_balance", _("Low balance")
    OUT_OF_FUNDS = "out_of_funds", _("Out of funds")
    BUDGET_THRESHOLD = "budget_threshold", _("Budget threshold crossed")
    BUDGET_REACHED = "budget_reached", _("Budget reached")
    INSTANCE_LIMIT_REACHED = "instance_limit_reached", _("Instance spending limit reached")
    QUOTA_DECIDED = "quota_decided", _("Quota request decided")
    RESERVATION = "reservation", _("Reserved capacity granted or ended")
    INVOICE_DECIDED = "invoice_decided", _("Invoice request decided")
    DEPLOYMENT_READY = "deployment_ready", _("Deployment ready")
    DEPLOYMENT_FAILED = "deployment_failed", _("Deployment failed")


class Notification(models.Model):
    """One line of a user's inbox. ``title`` and ``body`` are finished text in the recipient's
    language at creation (a worker renders them under ``translation.override``), so the inbox, the
    e-mail and the webhook say the same words."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    kind = models.CharField(_("kind"), max_length=32, choices=Kind.choices)
    title = models.CharField(_("title"), max_length=300)
    body = models.TextField(_("message"), blank=True)
    link = models.CharField(_("link"), max_length=500, blank=True)  # a path in the console, or empty
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    read_at = models.DateTimeField(_("read"), null=True, blank=True)

    class Meta:
        verbose_name = _("notification")
        verbose_name_plural = _("notifications")
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "read_at", "-created_at"], name="notif_user_unread")]

    def __str__(self) -> str:
        return f"{self.user_id}: {self.title}"

    @property
    def is_read(self) -> bool:
        return self.read_at is not None


class NotificationPreference(models.Model):
    """A user's choice for one kind, where it differs from ``notifications.preferences.DEFAULTS``.

    Only the e-mail and the webhook can be turned off: the inbox always keeps the line, since it is the
    record of what the console did to the user's machines and money, and costs nobody anything.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(_("kind"), max_length=32, choices=Kind.choices)
    email = models.BooleanField(_("e-mail"))
    webhook = models.BooleanField(_("webhook"))

    class Meta:
        verbose_name = _("notification preference")
        verbose_name_plural = _("notification preferences")
        constraints = [models.UniqueConstraint(fields=["user", "kind"], name="notif_pref_user_kind")]

    def __str__(self) -> str:
        return f"{self.user_id}: {self.kind}"


def _new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


class WebhookEndpoint(models.Model):
    """A URL of the user's that receives a signed POST for each notification whose kind goes to the
    webhook. ``secret`` signs every delivery (``notifications.webhooks.signature``); it is shown once,
    when the endpoint is created."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhook_endpoints")
    url = models.URLField(_("URL"), max_length=500)
    secret = models.CharField(max_length=80, default=_new_secret, editable=False)
    active = models.BooleanField(_("active"), default=True)
    created_at = models.DateTimeField(_("created"), default=timezone.now)

    class Meta:
        verbose_name = _("webhook endpoint")
        verbose_name_plural = _("webhook endpoints")
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return self.url


class WebhookDelivery(models.Model):
    """One event for one endpoint, delivered by ``notifications.tasks.webhook_deliver_task`` (retried
    with backoff). ``payload`` is the exact body signed and sent on every attempt; ``event_id`` is in
    it, so a receiver can drop repeats. ``next_attempt_at`` is when the next attempt is due (while one
    runs: when it is presumed lost); a pending delivery long past it lost its task, and the periodic
    sweep (``notifications_sweep``) enqueues it again."""

    class Status(models.TextChoices):
        PENDING = "pending", _("Pending")  # not sent yet, or a retry is due
        DELIVERED = "delivered", _("Delivered")  # a 2xx answer
        FAILED = "failed", _("Failed")  # every attempt failed, or refused for good (SSRF guard)

    event_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    notification = models.ForeignKey(Notification, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    kind = models.CharField(max_length=32)
    payload = models.TextField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    status_code = models.PositiveIntegerField(null=True, blank=True)  # the last attempt's answer
    error = models.CharField(max_length=500, blank=True)  # the last attempt's error
    duration_ms = models.PositiveIntegerField(null=True, blank=True)  # the last attempt's
    created_at = models.DateTimeField(default=timezone.now)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("webhook delivery")
        verbose_name_plural = _("webhook deliveries")
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="notif_webhook_due")]

    def __str__(self) -> str:
        return f"{self.kind} → {self.endpoint_id} ({self.status})"


class WebhookAttempt(models.Model):
    """One POST of a delivery: what came back, or the error, and how long it took."""

    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_rows")
    number = models.PositiveIntegerField()
    status_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    duration_ms = models.PositiveIntegerField()
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["delivery", "number"]
        constraints = [models.UniqueConstraint(fields=["delivery", "number"], name="notif_attempt_once")]

    def __str__(self) -> str:
        return f"{self.delivery_id} #{self.number}: {self.status_code or self.error}"


class EmailDelivery(models.Model):
    """One notification's e-mail: an outbox row written with the inbox line in the caller's
    transaction, sent by ``notifications.tasks.email_send_task`` once that commits. A mail server that
    refuses or is down delays the mail (retried with backoff, each attempt counted here) instead of
    losing it, and a row whose task was lost (a worker killed, a broker restarted) is enqueued again by
    the periodic sweep (``notifications_sweep``). The text is final, in the recipient's language."""

    class Status(models.TextChoices):
        PENDING = "pending", _("Pending")  # not sent yet, or a retry is due
        SENT = "sent", _("Sent")  # the mail server accepted it
        FAILED = "failed", _("Failed")  # every attempt failed

    notification = models.ForeignKey(Notification, on_delete=models.CASCADE, related_name="emails")
    address = models.EmailField(max_length=254)
    subject = models.CharField(max_length=500)
    body = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    error = models.CharField(max_length=500, blank=True)  # the last attempt's error
    created_at = models.DateTimeField(default=timezone.now)
    next_attempt_at = models.DateTimeField(default=timezone.now)  # as ``WebhookDelivery.next_attempt_at``
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("notification e-mail")
        verbose_name_plural = _("notification e-mails")
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="notif_email_due")]

    def __str__(self) -> str:
        return f"{self.address}: {self.subject} ({self.status})"
