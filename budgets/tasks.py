"""Periodic: the budget check (``budgets.services.budgets_check``, safe to run twice)."""

from __future__ import annotations

from celery import shared_task

from budgets import services


@shared_task(acks_late=True, ignore_result=True)
def budgets_check_task() -> dict[str, int]:
    return services.budgets_check()
