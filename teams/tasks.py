"""Periodic: pending invitations past their time become expired (``teams.services.invitations_expire``)."""

from __future__ import annotations

from celery import shared_task

from teams import services


@shared_task(acks_late=True, ignore_result=True)
def invitations_expire_task() -> int:
    return services.invitations_expire()
