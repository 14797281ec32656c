from celery import shared_task

from identity.services import phone_codes_prune


@shared_task(acks_late=True)
def phone_codes_prune_task() -> int:
    return phone_codes_prune()
