"""The e-mail and webhook delivery tasks (a row's id, one attempt per run, retried with backoff), the
sweep that enqueues again those whose task was lost, and the daily prune."""

from __future__ import annotations

from collections.abc import Callable

from celery import Task, shared_task

from notifications import services
from notifications.models import EmailDelivery, WebhookDelivery


def _attempt_until_done(task: Task, attempt: Callable[..., str], model, pk: int) -> str:
    """One attempt, and the next one scheduled when the row is due (its backoff, counted on the row,
    so a re-enqueued or repeated task never adds attempts nor comes sooner)."""
    outcome = attempt(pk, on_schedule=True)
    # Run eagerly (tests, CELERY_TASK_ALWAYS_EAGER) no worker comes back later: the attempts follow at once.
    while outcome == services.RETRY and task.request.is_eager:
        outcome = attempt(pk, on_schedule=False)
    if outcome == services.RETRY:
        raise task.retry(countdown=services.retry_in_s(model, pk=pk))
    return outcome


@shared_task(bind=True, acks_late=True, ignore_result=True, max_retries=None)
def webhook_deliver_task(self, delivery_id: int) -> str:
    """``max_retries`` is the service's (``NOTIFICATIONS_WEBHOOK_MAX_ATTEMPTS``, counted on the row)."""
    return _attempt_until_done(
        self,
        lambda pk, on_schedule: services.webhook_deliver(delivery_id=pk, on_schedule=on_schedule),
        WebhookDelivery,
        delivery_id,
    )


@shared_task(bind=True, acks_late=True, ignore_result=True, max_retries=None)
def email_send_task(self, email_id: int) -> str:
    """``max_retries`` is the service's (``NOTIFICATIONS_EMAIL_MAX_ATTEMPTS``, counted on the row)."""
    return _attempt_until_done(
        self,
        lambda pk, on_schedule: services.email_send(email_id=pk, on_schedule=on_schedule),
        EmailDelivery,
        email_id,
    )


@shared_task(acks_late=True, ignore_result=True)
def notifications_sweep_task() -> dict[str, int]:
    return services.notifications_sweep()


@shared_task(acks_late=True, ignore_result=True)
def notifications_prune_task() -> dict[str, int]:
    return services.notifications_prune()
