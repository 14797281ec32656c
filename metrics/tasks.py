"""Periodic tasks: thin wrappers over ``metrics.services`` (each safe to run twice, see there)."""

from __future__ import annotations

from celery import shared_task

from metrics import services


@shared_task(acks_late=True, ignore_result=True)
def metrics_collect_task() -> int:
    return services.metrics_collect()


@shared_task(acks_late=True, ignore_result=True)
def metrics_maintain_task() -> dict[str, int]:
    return services.metrics_maintain()


@shared_task(acks_late=True, ignore_result=True)
def metrics_idle_days_task() -> int:
    return services.metrics_idle_days()
