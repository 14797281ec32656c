"""The webhook delivery task (a delivery's id, one attempt per run, retried with backoff), and the daily prune."""

from __future__ import annotations

from celery import shared_task

from notifications import services


@shared_task(bind=True, acks_late=True, ignore_result=True, max_retries=None)
def webhook_deliver_task(self, delivery_id: int) -> str:
    """``max_retries`` is the service's (``NOTIFICATIONS_WEBHOOK_MAX_ATTEMPTS``, counted on the row), so a
    repeated or re-queued task never adds attempts."""
    outcome = services.webhook_deliver(delivery_id=delivery_id)
    # Run eagerly (tests, CELERY_TASK_ALWAYS_EAGER) no worker comes back later: the attempts follow at once.
    while outcome == services.RETRY and self.request.is_eager:
        outcome = services.webhook_deliver(delivery_id=delivery_id)
    if outcome == services.RETRY:
        raise self.retry(countdown=services.webhook_backoff_s(self.request.retries + 1))
    return outcome


@shared_task(acks_late=True, ignore_result=True)
def notifications_prune_task() -> dict[str, int]:
    return services.notifications_prune()
