"""Celery tasks: thin wrappers that take IDs and call a service.

Every task is safe to run twice (each service starts with its guard) and is acknowledged only after it
ran (``acks_late``); transient provider errors retry with backoff, as the instances app's tasks do.
"""

from __future__ import annotations

from celery import shared_task

from instances.tasks import RETRY
from storage import services


@shared_task(**RETRY)
def volume_create_task(volume_id: str) -> None:
    services.volume_create_execute(volume_id=volume_id)


@shared_task(**RETRY)
def volume_resize_task(volume_id: str) -> None:
    services.volume_resize_execute(volume_id=volume_id)


@shared_task(**RETRY)
def volume_delete_task(volume_id: str) -> None:
    services.volume_delete_execute(volume_id=volume_id)


@shared_task(acks_late=True)
def volumes_refresh_task() -> dict:
    return services.volumes_refresh()
