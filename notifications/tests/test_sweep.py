"""The periodic sweep: a pending e-mail or webhook delivery whose task was lost (never enqueued, a
worker killed mid-attempt) is enqueued again once it is late, sent once, and a second sweep or a
duplicate task adds nothing; one that waits for its backoff, or whose attempt is running, is left
alone."""

from __future__ import annotations

from datetime import timedelta

from django.core import mail
from django.utils import timezone

from notifications.models import EmailDelivery, Kind, WebhookDelivery
from notifications.services import Message, notifications_sweep, notify, webhook_deliver, webhook_endpoint_create
from notifications.tasks import notifications_sweep_task, webhook_deliver_task


def _lost(user) -> None:
    """A notification whose tasks never ran (the broker lost them): its rows are committed, pending."""
    notify(user=user, kind=Kind.LOW_BALANCE, render=lambda: Message(title="Low balance", body="Top up"))


def _late(model, seconds: int = 301) -> None:
    model.objects.update(next_attempt_at=timezone.now() - timedelta(seconds=seconds))


def test_lost_mails_and_deliveries_are_sent_once_after_the_deadline(
    alice, receiver, settings, django_capture_on_commit_callbacks
):
    settings.NOTIFICATIONS_SWEEP_AFTER_S = 300
    webhook_endpoint_create(user=alice, url=receiver.url)
    with django_capture_on_commit_callbacks(execute=False):
        _lost(alice)
    assert notifications_sweep() == {"emails": 0, "deliveries": 0}  # not late yet: its task may still come
    _late(EmailDelivery, 299)
    _late(WebhookDelivery, 299)
    assert notifications_sweep() == {"emails": 0, "deliveries": 0}
    _late(EmailDelivery)
    _late(WebhookDelivery)
    with django_capture_on_commit_callbacks(execute=True):
        assert notifications_sweep_task.apply().get() == {"emails": 1, "deliveries": 1}
    assert len(mail.outbox) == 1 and len(receiver.requests) == 1
    assert EmailDelivery.objects.get().status == EmailDelivery.Status.SENT
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == WebhookDelivery.Status.DELIVERED and delivery.attempts == 1
    with django_capture_on_commit_callbacks(execute=True):
        assert notifications_sweep() == {"emails": 0, "deliveries": 0}
        assert webhook_deliver_task.apply(args=[delivery.pk]).get() == "done"  # the original task, late
    assert len(mail.outbox) == 1 and len(receiver.requests) == 1


def test_a_swept_row_is_enqueued_once_even_if_the_sweep_runs_again(alice, receiver, django_capture_on_commit_callbacks):
    webhook_endpoint_create(user=alice, url=receiver.url)
    with django_capture_on_commit_callbacks(execute=False):
        _lost(alice)
    _late(WebhookDelivery)
    _late(EmailDelivery)
    with django_capture_on_commit_callbacks(execute=False) as enqueued:
        assert notifications_sweep() == {"emails": 1, "deliveries": 1}
        assert notifications_sweep() == {"emails": 0, "deliveries": 0}  # made due now: not late any more
    assert len(enqueued) == 2


def test_a_delivery_waiting_for_its_backoff_or_running_is_left_alone(
    alice, receiver, django_capture_on_commit_callbacks
):
    receiver.answers = [500]
    webhook_endpoint_create(user=alice, url=receiver.url)
    with django_capture_on_commit_callbacks(execute=False):
        _lost(alice)
    delivery = WebhookDelivery.objects.get()
    assert webhook_deliver(delivery_id=delivery.pk) == "retry"  # the next attempt in 30 s
    with django_capture_on_commit_callbacks(execute=False) as enqueued:
        assert notifications_sweep()["deliveries"] == 0
    assert enqueued == []
    # An attempt that started and whose worker died: left alone for the attempt's lease, then swept.
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now() + timedelta(seconds=60))
    assert notifications_sweep()["deliveries"] == 0
    _late(WebhookDelivery)
    with django_capture_on_commit_callbacks(execute=True):
        assert notifications_sweep()["deliveries"] == 1
    delivery.refresh_from_db()
    assert delivery.status == WebhookDelivery.Status.DELIVERED and delivery.attempts == 2
    assert len(receiver.requests) == 2


def test_the_sweep_runs_on_beat(settings):
    assert (
        settings.CELERY_BEAT_SCHEDULE["notifications-sweep"]["task"] == "notifications.tasks.notifications_sweep_task"
    )
