"""Celery tasks: thin wrappers that take IDs and call a service.

Every task is safe to run twice (each service starts with its guard) and is acknowledged only after
it ran (``acks_late``), so a worker killed halfway leaves the message to be delivered again. Transient
provider errors retry with exponential backoff; permanent ones are handled by the service; anything
else, and a transient error still there after the last retry, settles the instance with the error as
its reason (``core.tasks.OperationTask``: a launch fails, a machine with a disk is stopped).
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.core.cache import cache
from django.db import InterfaceError, OperationalError

from core.tasks import OperationTask
from instances import quota, reconciler, services
from instances.capacity import preemption, reservations, start_queue
from instances.models import Image, Instance, Node, Snapshot
from providers import BackendError, TransientBackendError, backend_aliases

logger = logging.getLogger(__name__)
S = Instance.Status

RETRY = {
    # A database hiccup (failover, too many connections) is as transient as a provider's: every
    # service starts with its guard, so running it again is safe.
    "autoretry_for": (TransientBackendError, OperationalError, InterfaceError),
    "retry_backoff": True,
    "retry_backoff_max": 60,
    "retry_jitter": True,
    "max_retries": 8,
    "acks_late": True,
}


def _fails_during(*statuses: str) -> dict:
    """The options of a task that settles its instance when it fails for good in one of ``statuses``."""
    return {
        "base": OperationTask,
        "fails": "instances.services.instance_operation_fail",
        "fails_during": statuses,
        **RETRY,
    }


def _poll_again_later(instance_id: str, again: bool) -> None:
    # Eager mode (tests) would run the countdown task at once and spin; there the test or the
    # reconciler polls instead.
    if again and not settings.CELERY_TASK_ALWAYS_EAGER:
        try:
            instance_poll_task.apply_async(args=[instance_id], countdown=settings.INSTANCES_POLL_INTERVAL_S)
        except Exception:
            # Only a shortcut: the operation itself is done, and the reconciler polls every busy instance.
            logger.warning("could not schedule a poll of %s", instance_id, exc_info=True)


@shared_task(**_fails_during(S.PROVISIONING))
def instance_provision_task(instance_id: str) -> None:
    _poll_again_later(instance_id, services.instance_provision(instance_id=instance_id))


@shared_task(**_fails_during(*Instance.BUSY))
def instance_poll_task(instance_id: str) -> None:
    _poll_again_later(instance_id, services.instance_sync(instance_id=instance_id))


@shared_task(**_fails_during(S.STOPPING))
def instance_stop_task(instance_id: str) -> None:
    services.instance_operation_execute(instance_id=instance_id, operation="stop")
    _poll_again_later(instance_id, _busy(instance_id))


@shared_task(**_fails_during(S.STARTING))
def instance_start_task(instance_id: str) -> None:
    services.instance_operation_execute(instance_id=instance_id, operation="start")
    _poll_again_later(instance_id, _busy(instance_id))


@shared_task(**_fails_during(S.RESTARTING))
def instance_restart_task(instance_id: str) -> None:
    services.instance_operation_execute(instance_id=instance_id, operation="restart")
    _poll_again_later(instance_id, _busy(instance_id))


@shared_task(**_fails_during(S.RELEASING))
def instance_release_task(instance_id: str) -> None:
    services.instance_operation_execute(instance_id=instance_id, operation="release")


@shared_task(
    base=OperationTask,
    fails="instances.services.image_save_fail",
    fails_during=(Image.Status.SAVING,),
    **RETRY,
)
def image_save_task(image_id: int) -> None:
    """Commit and push a machine saved as an image (``image_save_execute``); a final failure fails the image."""
    services.image_save_execute(image_id=image_id)


@shared_task(
    base=OperationTask,
    fails="instances.services.image_build_fail",
    fails_during=(Image.Status.BUILDING,),
    **RETRY,
)
def image_build_task(image_id: int) -> None:
    """Build an image from its recipe and push it (``image_build_execute``); a final failure fails it."""
    services.image_build_execute(image_id=image_id)


@shared_task(acks_late=True)
def image_registry_delete_task(image_id: int) -> bool:
    """A deleted image's manifest out of the registry (best effort: ``image_registry_delete``)."""
    return services.image_registry_delete(image_id=image_id)


@shared_task(
    base=OperationTask,
    fails="instances.services.snapshot_fail",
    fails_during=(Snapshot.Status.CREATING,),
    **RETRY,
)
def snapshot_create_task(snapshot_id: int) -> None:
    """Copy an instance's disk (``snapshot_create_execute``); a final failure fails the snapshot."""
    services.snapshot_create_execute(snapshot_id=snapshot_id)


@shared_task(
    base=OperationTask,
    fails="instances.services.snapshot_fail",
    fails_during=(Snapshot.Status.RESTORING,),
    **RETRY,
)
def snapshot_restore_task(snapshot_id: int) -> None:
    """Copy a snapshot back over its stopped instance's disk (``snapshot_restore_execute``)."""
    services.snapshot_restore_execute(snapshot_id=snapshot_id)


@shared_task(**RETRY)
def snapshot_delete_task(snapshot_id: int) -> None:
    """Remove a deleted snapshot's copy from the provider (``snapshot_delete_execute``)."""
    services.snapshot_delete_execute(snapshot_id=snapshot_id)


@shared_task(acks_late=True)
def snapshots_scheduled_task() -> dict:
    """The beat's pass over snapshot schedules that are due (``snapshots_scheduled``)."""
    return services.snapshots_scheduled()


@shared_task(**RETRY)
def instance_preempt_task(instance_id: str) -> None:
    """Warn and checkpoint now; power off after the grace period (the reconciler is the net under it)."""
    preemption.instance_preemption_begin(instance_id=instance_id)
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return  # eager mode would finish at once: tests and the reconciler finish it when it is due
    try:
        instance_preemption_finish_task.apply_async(args=[instance_id], countdown=preemption.grace_s())
    except Exception:
        logger.warning("could not schedule the end of %s's grace period", instance_id, exc_info=True)


@shared_task(**RETRY)
def instance_preemption_finish_task(instance_id: str) -> None:
    preemption.instance_preemption_finish(instance_id=instance_id)


@shared_task(acks_late=True)
def instances_requeue_task() -> int:
    # Preempted instances first: they held their cards before anyone joined the line of starts.
    return preemption.instances_requeue() + start_queue.instances_start_queued()


@shared_task(acks_late=True)
def instances_reconcile_task() -> dict:
    return reconciler.instances_reconcile()


@shared_task(acks_late=True)
def nodes_sync_task(alias: str) -> int:
    try:
        return services.nodes_sync(alias=alias)
    except BackendError:
        logger.warning("backend %s unreachable; its capacity shows once it answers", alias, exc_info=True)
        return 0


def nodes_ensure_soon() -> None:
    """For pages that show capacity: have a worker read the nodes of each backend the console knows none
    of yet (a fresh install, a new backend). The page does not ask the provider itself, which may be
    slow or down; the reconciler reads every backend's nodes anyway, this only comes sooner. At most one
    request per backend a minute, however often the page is loaded."""
    known = set(Node.objects.values_list("backend_alias", flat=True).distinct())
    for alias in backend_aliases():
        if alias not in known and cache.add(f"instances:nodes-sync-asked:{alias}", 1, timeout=60):
            try:
                nodes_sync_task.delay(alias)
            except Exception:
                logger.warning("could not ask for the nodes of %s", alias, exc_info=True)


@shared_task(acks_late=True)
def instances_auto_stop_task() -> int:
    return services.instances_auto_stop()


@shared_task(acks_late=True)
def instances_experiment_runs_task() -> int:
    """Save running instances' W&B runs where pages read them (``instances_experiment_runs_refresh``)."""
    return services.instances_experiment_runs_refresh()


@shared_task(acks_late=True)
def quota_grants_expire_task() -> int:
    return quota.quota_grants_expire()


@shared_task(acks_late=True)
def reservations_expire_task() -> int:
    return reservations.reservations_expire()


@shared_task(acks_late=True)
def quota_requests_overdue_task() -> int:
    return quota.quota_requests_overdue_escalate()


def _busy(instance_id: str) -> bool:
    return Instance.objects.filter(pk=instance_id, status__in=Instance.BUSY).exists()
