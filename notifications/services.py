"""Telling a user something: ``notify`` writes the inbox line, and mails and calls webhooks as the
user's preferences say. Plus the user's own writes: read marks, preferences, webhook endpoints.

Every app that tells users things calls ``notify`` (billing, instances, budgets, invoices, the
marketplace). It is low in the layers and knows users only by their attributes, so a worker that
renders a message does it in the recipient's language: ``render`` is called inside
``translation.override(user.language)``, once per recipient.

    notify(
        user=instance.owner,
        kind=Kind.PREEMPTED,
        render=lambda: Message(title=_("%(name)s is being preempted") % {"name": instance.name}, body=...),
        link=f"/instances/{instance.pk}/",
        data={"instance_id": str(instance.pk)},
    )

The inbox row is written in the caller's transaction (it rolls back with it), and so are the rows
of its e-mails and webhook deliveries (an outbox); their tasks and the live count on open pages go
once it commits. Each e-mail and delivery is retried with backoff until it succeeds or its attempts
run out, and ``notifications_sweep`` (beat) enqueues again any whose task was lost.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from core.live import notify_user
from core.tasks import enqueue_on_commit, error_text
from notifications import webhooks
from notifications.hooks import recipients
from notifications.models import (
    EmailDelivery,
    Notification,
    NotificationPreference,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
)
from notifications.preferences import DEFAULTS
from notifications.selectors import channels_for

logger = logging.getLogger(__name__)

DELIVER_TASK = "notifications.tasks.webhook_deliver_task"
EMAIL_TASK = "notifications.tasks.email_send_task"
# How long an attempt that started may take before the sweep presumes its worker gone: longer than a
# webhook's timeouts or an SMTP conversation.
ATTEMPT_LEASE_S = 120
# A task may run this much before its row's due time (clocks of workers differ by a little) and
# still attempt; earlier, it is a duplicate of one the sweep or a retry enqueued, and does nothing.
EARLY_S = 5
TEST_KIND = "test"


@dataclass(frozen=True)
class Message:
    """What one recipient is told, in their language."""

    title: str
    body: str = ""
    mail_subject: str = ""  # the e-mail's subject where it says more than the title (a site prefix)


def language_of(user) -> str:
    """The language a user reads: their ``language`` field, or the site's."""
    return getattr(user, "language", "") or settings.LANGUAGE_CODE


def recipients_for(*, user, kind: str, actor=None) -> list:
    """Who hears about ``user``'s account: ``notifications.hooks.recipients`` may expand it (a team's
    owners and admins, and ``actor``, the person who launched the thing the news is about, while they
    may still see it); without one, the user itself. Each person once, in the hook's order."""
    people = {person.pk: person for person in recipients(user=user, kind=kind, actor=actor)}
    return list(people.values())


def notify(
    *,
    user,
    kind: str,
    render: Callable[[], Message],
    link: str = "",
    data: dict | None = None,
    actor=None,
) -> list[Notification]:
    """Tell ``user`` (and whoever the recipients hook adds) about ``kind``: an inbox line each, and
    the e-mail and webhooks their preferences ask for. ``data`` (JSON, language-free: ids, amounts in
    fen) goes into the webhook's payload beside the rendered text. ``actor`` is the person who
    launched what the news is about (``Instance.created_by``): in a team's account it is a member who
    hears about their own machine beside the owners and admins; the hook decides whether they still
    may. Returns the inbox rows."""
    people = recipients_for(user=user, kind=kind, actor=actor)
    if not people:
        return []
    channels = channels_for(user_ids=[p.pk for p in people], kind=kind)
    now = timezone.now()
    rows, mails = [], []
    for person in people:
        with translation.override(language_of(person)):
            message = render()
        row = Notification(
            user_id=person.pk, kind=kind, title=message.title[:300], body=message.body, link=link, created_at=now
        )
        rows.append(row)
        # An address under .invalid (RFC 2606: a team's account, an account made by mobile number that
        # has added no e-mail yet) can receive nothing: the inbox alone tells them.
        if channels[person.pk].email and person.email and not person.email.endswith(".invalid"):
            mails.append((row, message.mail_subject or message.title, message.body, person.email))
    Notification.objects.bulk_create(rows)
    emails = EmailDelivery.objects.bulk_create(
        EmailDelivery(notification=row, address=address, subject=subject[:500], body=body, created_at=now)
        for row, subject, body, address in mails
    )
    for email in emails:
        enqueue_on_commit(EMAIL_TASK, email.pk)
    hooked = [person.pk for person in people if channels[person.pk].webhook]
    endpoints = list(WebhookEndpoint.objects.filter(user_id__in=hooked, active=True)) if hooked else []
    by_user = {row.user_id: row for row in rows}
    deliveries = WebhookDelivery.objects.bulk_create(
        _delivery(endpoint=endpoint, kind=kind, notification=by_user[endpoint.user_id], data=data or {}, at=now)
        for endpoint in endpoints
    )
    for delivery in deliveries:
        enqueue_on_commit(DELIVER_TASK, delivery.pk)
    user_ids = [row.user_id for row in rows]
    titles = {row.user_id: row.title for row in rows}
    transaction.on_commit(lambda: _after_commit(user_ids=user_ids, titles=titles))
    return rows


def _after_commit(*, user_ids: list[int], titles: dict[int, str]) -> None:
    """The pages' live count (the e-mails are their own tasks)."""
    for user_id in user_ids:
        try:
            notify_user(
                user_id=user_id,
                payload={"type": "notice", "message": titles[user_id], "unread": _unread(user_id)},
            )
        except Exception:  # best effort: the bell shows the truth on the next page load
            logger.warning("live notice failed for user %s", user_id, exc_info=True)


def _unread(user_id: int) -> int:
    return Notification.objects.filter(user_id=user_id, read_at__isnull=True).count()


def _payload(*, event_id: uuid.UUID, kind: str, at: datetime, data: dict) -> str:
    return json.dumps(
        {"id": str(event_id), "type": kind, "created_at": at.isoformat(), "data": data},
        ensure_ascii=False,
        separators=(",", ":"),
        sort_keys=True,
    )


def _delivery(*, endpoint: WebhookEndpoint, kind: str, notification: Notification | None, data: dict, at: datetime):
    event_id = uuid.uuid4()
    if notification is not None:
        data = {"title": notification.title, "body": notification.body, "link": notification.link, **data}
    return WebhookDelivery(
        event_id=event_id,
        endpoint=endpoint,
        notification=notification,
        kind=kind,
        payload=_payload(event_id=event_id, kind=kind, at=at, data=data),
        created_at=at,
    )


# --- The inbox --------------------------------------------------------------------------------------


def notifications_mark_read(*, user, ids: Iterable[int] | None = None) -> int:
    """Mark ``user``'s notifications read: those in ``ids`` (others' ids are ignored), or all with
    ``None``. Returns how many changed."""
    rows = Notification.objects.filter(user=user, read_at__isnull=True)
    if ids is not None:
        rows = rows.filter(pk__in=list(ids))
    changed = rows.update(read_at=timezone.now())
    if changed:
        transaction.on_commit(lambda: _push_count(user.pk))
    return changed


def _push_count(user_id: int) -> None:
    try:
        notify_user(user_id=user_id, payload={"type": "notifications", "unread": _unread(user_id)})
    except Exception:
        logger.warning("live count failed for user %s", user_id, exc_info=True)


def notifications_prune(*, now: datetime | None = None) -> dict[str, int]:
    """Daily: drop inbox lines older than ``NOTIFICATIONS_KEEP_DAYS`` and finished webhook deliveries
    (with their attempts) and e-mails older than ``NOTIFICATIONS_WEBHOOK_DELIVERIES_KEEP_DAYS``, so no
    table grows without bound. Pending ones stay until their last attempt."""
    now = now or timezone.now()
    old_deliveries = WebhookDelivery.objects.filter(
        created_at__lt=now - timedelta(days=settings.NOTIFICATIONS_WEBHOOK_DELIVERIES_KEEP_DAYS)
    ).exclude(status=WebhookDelivery.Status.PENDING)
    _total, deliveries = old_deliveries.delete()
    EmailDelivery.objects.filter(
        created_at__lt=now - timedelta(days=settings.NOTIFICATIONS_WEBHOOK_DELIVERIES_KEEP_DAYS)
    ).exclude(status=EmailDelivery.Status.PENDING).delete()
    _total, notifications = Notification.objects.filter(
        created_at__lt=now - timedelta(days=settings.NOTIFICATIONS_KEEP_DAYS)
    ).delete()
    return {
        "notifications": notifications.get("notifications.Notification", 0),
        "deliveries": deliveries.get("notifications.WebhookDelivery", 0),
    }


# --- Preferences -------------------------------------------------------------------------------------


def preferences_set(*, user, choices: dict[str, dict[str, bool]]) -> None:
    """Save where each kind in ``choices`` goes (``{"low_balance": {"email": True, "webhook": False}}``).
    A choice equal to the default is stored as no row, so a later change of a default reaches it."""
    unknown = set(choices) - set(DEFAULTS)
    if unknown:
        raise ValidationError(_("Unknown kind: %(kind)s") % {"kind": ", ".join(sorted(unknown))}, code="kind")
    with transaction.atomic():
        for kind, chosen in choices.items():
            default = DEFAULTS[kind]
            email = bool(chosen.get("email", default.email))
            webhook = bool(chosen.get("webhook", default.webhook))
            if (email, webhook) == (default.email, default.webhook):
                NotificationPreference.objects.filter(user=user, kind=kind).delete()
            else:
                NotificationPreference.objects.update_or_create(
                    user=user, kind=kind, defaults={"email": email, "webhook": webhook}
                )


# --- Webhook endpoints -------------------------------------------------------------------------------


class EndpointLimitReached(Exception):
    """The user has ``NOTIFICATIONS_WEBHOOKS_PER_USER`` endpoints already (the API answers 409)."""


def webhook_endpoint_create(*, user, url: str, active: bool = True) -> WebhookEndpoint:
    """A new endpoint with a fresh secret (the caller shows ``endpoint.secret`` once)."""
    url = webhooks.url_check(url)
    if WebhookEndpoint.objects.filter(user=user).count() >= settings.NOTIFICATIONS_WEBHOOKS_PER_USER:
        raise EndpointLimitReached(
            _("You can have at most %(n)d webhook endpoints.") % {"n": settings.NOTIFICATIONS_WEBHOOKS_PER_USER}
        )
    return WebhookEndpoint.objects.create(user=user, url=url, active=active)


def webhook_endpoint_update(*, endpoint: WebhookEndpoint, url: str | None = None, active: bool | None = None):
    if url is not None:
        endpoint.url = webhooks.url_check(url)
    if active is not None:
        endpoint.active = active
    endpoint.save(update_fields=["url", "active"])
    return endpoint


def webhook_endpoint_delete(*, endpoint: WebhookEndpoint) -> None:
    endpoint.delete()


def webhook_test_send(*, endpoint: WebhookEndpoint) -> WebhookDelivery:
    """The "Send test event" button: a ``test`` event to this endpoint alone, through the same task."""
    with translation.override(language_of(endpoint.user)):
        data = {"title": _("Test event"), "body": _("Your webhook endpoint works."), "link": ""}
    delivery = _delivery(endpoint=endpoint, kind=TEST_KIND, notification=None, data=data, at=timezone.now())
    delivery.save()
    enqueue_on_commit(DELIVER_TASK, delivery.pk)
    return delivery


# --- Delivery ------------------------------------------------------------------------------------------

DELIVERED, RETRY, FAILED, DONE = "delivered", "retry", "failed", "done"


def webhook_backoff_s(attempt: int) -> int:
    """Seconds before attempt ``attempt + 1``: doubling from ``NOTIFICATIONS_WEBHOOK_BACKOFF_S``, at most an hour."""
    return min(settings.NOTIFICATIONS_WEBHOOK_BACKOFF_S * 2 ** max(attempt - 1, 0), 3600)


def _claim(model, *, pk: int, attempts: int, on_schedule: bool) -> bool:
    """Take the next attempt of a pending row (compare-and-set on its attempt count), once it is due
    unless ``on_schedule`` is off (an eager run: no worker comes back later). The row is then due only
    after the attempt's lease, so the sweep leaves a running attempt alone. False: another worker took
    it, or it is not due (a duplicate task: the sweep's, or a retry's that another run overtook)."""
    now = timezone.now()
    rows = model.objects.filter(pk=pk, status="pending", attempts=attempts)
    if on_schedule:
        rows = rows.filter(next_attempt_at__lte=now + timedelta(seconds=EARLY_S))
    return bool(rows.update(attempts=attempts + 1, next_attempt_at=now + timedelta(seconds=ATTEMPT_LEASE_S)))


def retry_in_s(model, *, pk: int) -> int:
    """Seconds until a pending row's next attempt is due (the task's countdown): 0 when due or gone."""
    due = model.objects.filter(pk=pk, status="pending").values_list("next_attempt_at", flat=True).first()
    return max(0, int((due - timezone.now()).total_seconds())) if due else 0


def webhook_deliver(*, delivery_id: int, now: float | None = None, on_schedule: bool = True) -> str:
    """One attempt at a pending delivery: POST the stored payload, freshly signed; record the attempt.

    Returns ``delivered``, ``retry`` (the task schedules the next attempt), ``failed`` (the last
    attempt, or a URL refused for good) or ``done`` (nothing to do: already delivered or failed,
    another worker claimed this attempt, or it is not due yet): a repeated task never posts twice for
    one attempt, nor sooner than the backoff says.
    """
    delivery = WebhookDelivery.objects.select_related("endpoint").filter(pk=delivery_id).first()
    if delivery is None or delivery.status != WebhookDelivery.Status.PENDING:
        return DONE
    number = delivery.attempts + 1
    if not _claim(WebhookDelivery, pk=delivery.pk, attempts=delivery.attempts, on_schedule=on_schedule):
        return DONE
    endpoint = delivery.endpoint
    body = delivery.payload.encode()
    timestamp = int(time.time() if now is None else now)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": f"{settings.CONSOLE_SITE_NAME}-Webhooks/1",
        "Console-Event-Id": str(delivery.event_id),
        "Console-Event-Type": delivery.kind,
        webhooks.SIGNATURE_HEADER: webhooks.signature(secret=endpoint.secret, timestamp=timestamp, body=body),
    }
    code, error, final = None, "", False
    started = time.monotonic()
    if not endpoint.active:
        error, final = _("The endpoint is turned off."), True
    else:
        try:
            code = webhooks.post(url=endpoint.url, body=body, headers=headers).status_code
        except webhooks.WebhookRefused as exc:
            error, final = str(exc), True
        except webhooks.WebhookTransient as exc:
            error = str(exc)
        if code is not None and not 200 <= code < 300:
            error = _("The endpoint answered %(code)d.") % {"code": code}
    duration_ms = int((time.monotonic() - started) * 1000)
    if code is not None and 200 <= code < 300:
        outcome = DELIVERED
    elif final or number >= settings.NOTIFICATIONS_WEBHOOK_MAX_ATTEMPTS:
        outcome = FAILED
    else:
        outcome = RETRY
    status = {DELIVERED: "delivered", FAILED: "failed", RETRY: "pending"}[outcome]
    with transaction.atomic():
        WebhookAttempt.objects.create(
            delivery=delivery, number=number, status_code=code, error=error[:500], duration_ms=duration_ms
        )
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            status=status,
            status_code=code,
            error=error[:500],
            duration_ms=duration_ms,
            delivered_at=timezone.now() if outcome == DELIVERED else None,
            next_attempt_at=timezone.now() + timedelta(seconds=webhook_backoff_s(number)),
        )
    if outcome != DELIVERED:
        logger.warning("webhook delivery %s attempt %d: %s", delivery.pk, number, error)
    return outcome


def email_send(*, email_id: int, on_schedule: bool = True) -> str:
    """One attempt at a pending e-mail. Returns ``delivered``, ``retry``, ``failed`` (its last
    attempt: ``NOTIFICATIONS_EMAIL_MAX_ATTEMPTS``) or ``done`` (sent, failed, taken by another worker,
    or not due). At least once: a worker killed between the server's acceptance and the row's update
    sends it again after the sweep, which a mail reader forgives more than a lost mail."""
    email = EmailDelivery.objects.filter(pk=email_id).first()
    if email is None or email.status != EmailDelivery.Status.PENDING:
        return DONE
    number = email.attempts + 1
    if not _claim(EmailDelivery, pk=email.pk, attempts=email.attempts, on_schedule=on_schedule):
        return DONE
    try:
        send_mail(email.subject, email.body, settings.DEFAULT_FROM_EMAIL, [email.address])
    except Exception as exc:  # SMTP errors, refused connections, timeouts: the server's trouble, retried
        error = error_text(exc)[:500]
        outcome = FAILED if number >= settings.NOTIFICATIONS_EMAIL_MAX_ATTEMPTS else RETRY
        EmailDelivery.objects.filter(pk=email.pk).update(
            status=EmailDelivery.Status.FAILED if outcome == FAILED else EmailDelivery.Status.PENDING,
            error=error,
            next_attempt_at=timezone.now() + timedelta(seconds=webhook_backoff_s(number)),
        )
        logger.warning("notification e-mail %s to %s, attempt %d: %s", email.pk, email.address, number, error)
        return outcome
    EmailDelivery.objects.filter(pk=email.pk).update(status=EmailDelivery.Status.SENT, error="", sent_at=timezone.now())
    return DELIVERED


def notifications_sweep(*, now: datetime | None = None, batch: int = 500) -> dict[str, int]:
    """Periodic: enqueue again the pending e-mails and webhook deliveries whose task was lost (a killed
    worker, a broker that lost its queue): due more than ``NOTIFICATIONS_SWEEP_AFTER_S`` ago. Each is
    made due now, so the next sweep leaves it to its new task; a duplicate task finds the attempt taken
    or not due and does nothing. Returns how many of each were enqueued."""
    now = now or timezone.now()
    late = now - timedelta(seconds=settings.NOTIFICATIONS_SWEEP_AFTER_S)
    counts = {}
    for name, model, task in (("emails", EmailDelivery, EMAIL_TASK), ("deliveries", WebhookDelivery, DELIVER_TASK)):
        # Locked and made due now in one transaction: a second sweep at once skips these rows, and
        # finds them not late once this one commits.
        with transaction.atomic():
            ids = list(
                model.objects.select_for_update(skip_locked=True)
                .filter(status="pending", next_attempt_at__lt=late)
                .order_by("next_attempt_at")
                .values_list("pk", flat=True)[:batch]
            )
            model.objects.filter(pk__in=ids).update(next_attempt_at=now)
            for pk in ids:
                enqueue_on_commit(task, pk)
        counts[name] = len(ids)
        if ids:
            logger.warning("re-enqueued %d %s whose task was lost", len(ids), name)
    return counts
