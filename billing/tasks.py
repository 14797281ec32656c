"""Billing's periodic tasks: thin wrappers over services that are safe to repeat and to overlap.

Each is ``acks_late``: a worker killed mid-run leaves the message to be delivered again, and every
service here is idempotent (settlement keys, one alert episode, one expiry per grant), so the
repeat finishes the work without doing any of it twice.
"""

from __future__ import annotations

from celery import shared_task

from billing.alerts import balance_alerts_update
from billing.payments import gateway_certificates_refresh, refund_confirm, refunds_confirm, topup_orders_expire
from billing.reconciliation import reconciliation_run_all
from billing.services import ledger_check_record, trial_expire_due
from billing.settlement import meters_settle_all


@shared_task(acks_late=True, ignore_result=True)
def meters_settle_task() -> dict:
    report = meters_settle_all()
    return {"meters": report.meters, "postings": report.postings, "charged_fen": report.charged_fen}


@shared_task(acks_late=True, ignore_result=True)
def balance_alerts_task() -> None:
    balance_alerts_update()


@shared_task(acks_late=True, ignore_result=True)
def ledger_check_task() -> bool:
    return ledger_check_record().ok


@shared_task(acks_late=True, ignore_result=True)
def trial_expire_task() -> int:
    return trial_expire_due()


@shared_task(acks_late=True, ignore_result=True)
def topup_orders_expire_task() -> int:
    return topup_orders_expire()


@shared_task(acks_late=True, ignore_result=True)
def reconciliation_task() -> int:
    """Yesterday's bills against the ledger; returns how many gateways disagreed. Rerunning replaces the day."""
    return sum(1 for run in reconciliation_run_all() if not run.ok)


@shared_task(acks_late=True, ignore_result=True)
def refunds_confirm_task() -> dict[str, int]:
    """Pending refunds (WeChat Pay's PROCESSING, Stripe's pending) asked about again and settled."""
    return refunds_confirm()


@shared_task(acks_late=True, ignore_result=True)
def refund_confirm_task(refund_id: int) -> str:
    """One refund settled from its gateway's answer (a refund notification asked for it); safe to repeat."""
    return refund_confirm(refund_id=refund_id)


@shared_task(acks_late=True, ignore_result=True)
def gateway_certificates_refresh_task() -> int:
    return gateway_certificates_refresh()
