"""A notification's e-mail is an outbox row written with its inbox line: sent by its task once the
transaction commits, retried with backoff while the mail server fails, once only, given up after the
last attempt; a rolled-back notification mails nobody."""

from __future__ import annotations

from datetime import timedelta
from smtplib import SMTPServerDisconnected

import pytest
from django.core import mail
from django.core.mail.backends.locmem import EmailBackend
from django.db import transaction
from django.utils import timezone

from notifications.models import EmailDelivery, Kind, Notification
from notifications.services import Message, email_send, notifications_prune, notify, retry_in_s
from notifications.tasks import email_send_task


class FlakyBackend(EmailBackend):
    """The mail server refuses the first ``failures`` messages, then accepts (into ``mail.outbox``)."""

    failures = 0

    def send_messages(self, messages):
        if FlakyBackend.failures:
            FlakyBackend.failures -= 1
            raise SMTPServerDisconnected("Connection unexpectedly closed")
        return super().send_messages(messages)


@pytest.fixture
def flaky(settings):
    settings.EMAIL_BACKEND = f"{__name__}.FlakyBackend"
    FlakyBackend.failures = 0
    yield FlakyBackend
    FlakyBackend.failures = 0


def _tell(user) -> EmailDelivery:
    notify(user=user, kind=Kind.LOW_BALANCE, render=lambda: Message(title="Low balance", body="Top up"))
    return EmailDelivery.objects.get(notification__user=user)


def test_the_mail_is_sent_by_its_task_once_committed(alice, flaky, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        email = _tell(alice)
    email.refresh_from_db()
    assert email.status == EmailDelivery.Status.SENT and email.attempts == 1 and email.sent_at is not None
    assert [(m.subject, m.to) for m in mail.outbox] == [("Low balance", ["alice@example.com"])]
    assert email_send_task.apply(args=[email.pk]).get() == "done"  # a repeated task sends nothing more
    assert len(mail.outbox) == 1


def test_a_failing_server_is_retried_after_the_backoff(alice, flaky, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        email = _tell(alice)
    flaky.failures = 1
    assert email_send(email_id=email.pk) == "retry"
    email.refresh_from_db()
    assert email.status == EmailDelivery.Status.PENDING and email.attempts == 1
    assert "SMTPServerDisconnected" in email.error and mail.outbox == []
    assert 25 <= retry_in_s(EmailDelivery, pk=email.pk) <= 30  # the task's countdown: the first backoff
    assert email_send(email_id=email.pk) == "done"  # a duplicate task before it is due sends nothing
    EmailDelivery.objects.filter(pk=email.pk).update(next_attempt_at=timezone.now())
    assert email_send(email_id=email.pk) == "delivered"
    assert email_send(email_id=email.pk) == "done"
    email.refresh_from_db()
    assert email.status == EmailDelivery.Status.SENT and email.attempts == 2 and len(mail.outbox) == 1


def test_the_task_retries_until_the_server_accepts(alice, flaky, django_capture_on_commit_callbacks):
    flaky.failures = 2
    with django_capture_on_commit_callbacks(execute=True):
        email = _tell(alice)  # eager: the retries run at once
    email.refresh_from_db()
    assert email.status == EmailDelivery.Status.SENT and email.attempts == 3 and len(mail.outbox) == 1


def test_it_gives_up_after_the_last_attempt(alice, flaky, settings, django_capture_on_commit_callbacks):
    settings.NOTIFICATIONS_EMAIL_MAX_ATTEMPTS = 3
    flaky.failures = 10
    with django_capture_on_commit_callbacks(execute=True):
        email = _tell(alice)
    email.refresh_from_db()
    assert email.status == EmailDelivery.Status.FAILED and email.attempts == 3 and mail.outbox == []
    assert Notification.objects.filter(user=alice).count() == 1  # the inbox still has the line


def test_a_rolled_back_notification_mails_nobody(alice, flaky, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(RuntimeError), transaction.atomic():
        _tell(alice)
        raise RuntimeError("the caller's transaction fails")
    assert not EmailDelivery.objects.exists() and mail.outbox == []


def test_finished_mails_are_pruned_with_the_deliveries(alice, flaky, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        _tell(alice)
    EmailDelivery.objects.update(created_at=timezone.now() - timedelta(days=31))
    notifications_prune()
    assert not EmailDelivery.objects.exists() and Notification.objects.exists()
