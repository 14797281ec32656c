"""The webhook delivery task: takes a delivery's id, one attempt per run, retried with backoff."""

from __future__ import annotations

from celery import shared_task

from notifications import services


@shared_task(bind=True, acks_late=True, ignore_result=True, max_retries=None)
def webhook_deliver_task(self, delivery_id: int) -> str:
    outcome = services.webhook_deliver(delivery_id=delivery_id)
    if outcome == services.RETRY:
        raise self.retry(countdown=services.webhook_backoff_s(self.request.retries + 1))
    return outcome
