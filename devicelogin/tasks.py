"""Periodic: expired device log-ins are deleted (``devicelogin.services.device_logins_prune``)."""

from __future__ import annotations

from celery import shared_task

from devicelogin import services


@shared_task(acks_late=True, ignore_result=True)
def device_logins_prune_task() -> int:
    return services.device_logins_prune()
