"""Celery tasks: thin wrappers that take IDs and call a service.

Every task is safe to run twice (each service starts with its guard) and is acknowledged only after it
ran (``acks_late``); transient provider errors retry with backoff, as the instances app's tasks do;
anything else, and a transient error still there after the last retry, settles the volume with the
error as its reason (``core.tasks.OperationTask``).
"""

from __future__ import annotations

from celery import shared_task

from core.tasks import OperationTask
from instances.tasks import RETRY
from storage import services
from storage.models import Volume

V = Volume.Status


def _fails_during(status: str) -> dict:
    """The options of a task that settles its volume when it fails for good in ``status``."""
    return {
        "base": OperationTask,
        "fails": "storage.services.volume_operation_fail",
        "fails_during": (status,),
        **RETRY,
    }


@shared_task(**_fails_during(V.CREATING))
def volume_create_task(volume_id: str) -> None:
    services.volume_create_execute(volume_id=volume_id)


@shared_task(**_fails_during(V.RESIZING))
def volume_resize_task(volume_id: str) -> None:
    services.volume_resize_execute(volume_id=volume_id)


@shared_task(**_fails_during(V.DELETING))
def volume_delete_task(volume_id: str) -> None:
    services.volume_delete_execute(volume_id=volume_id)


@shared_task(acks_late=True)
def volumes_refresh_task() -> dict:
    return services.volumes_refresh()
