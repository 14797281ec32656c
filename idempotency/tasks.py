from celery import shared_task

from idempotency.services import idempotency_keys_prune


@shared_task(acks_late=True)
def idempotency_keys_prune_task() -> int:
    """Periodic (beat): forget keys older than 24 h."""
    return idempotency_keys_prune()
