"""Billing's periodic tasks: thin wrappers over services that are safe to repeat and to overlap.

Each is ``acks_late``: a worker killed mid-run leaves the message to be delivered again, and every
service here is idempotent (settlement keys, one alert episode, one expiry per grant), so the
repeat finishes the work without doing any of it twice.
"""

from __future__ import annotations

from celery import shared_task


@shared_task(acks_late=True, ignore_result=True)
def meters_settle_task() -> dict:
    from billing.settlement import meters_settle_all

    report = meters_settle_all()
    return {"meters": report.meters, "postings": report.postings, "charged_fen": report.charged_fen}


@shared_task(acks_late=True, ignore_result=True)
def balance_alerts_task() -> None:
    from billing.alerts import balance_alerts_update

    balance_alerts_update()


@shared_task(acks_late=True, ignore_result=True)
def ledger_check_task() -> bool:
    from billing.services import ledger_check_record

    return ledger_check_record().ok


@shared_task(acks_late=True, ignore_result=True)
def trial_expire_task() -> int:
    from billing.services import trial_expire_due

    return trial_expire_due()


@shared_task(acks_late=True, ignore_result=True)
def topup_orders_expire_task() -> int:
    from billing.payments import topup_orders_expire

    return topup_orders_expire()
