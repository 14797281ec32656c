"""The daily reconciliation: each gateway's bill for a day, compared with what the ledger says moved.

A gateway settles what payers really paid and what really went back; the ledger says what the
console credited and refunded. They must agree order by order. Payments are matched by order (the
ledger's credit for an order is found whenever it was posted, so a payment made at 23:59:59 and
credited a second later does not count as missing); refunds are compared per order within the day.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import date, datetime, timedelta

from django.db.models import Sum
from django.utils import timezone

from billing.gateways import GatewayError, gateway_get, gateways_enabled
from billing.gateways.base import SettledLine
from billing.models import Entry, LedgerAccount, ReconciliationRun, TopUpOrder

logger = logging.getLogger(__name__)


def _day_bounds(day: date) -> tuple[datetime, datetime]:
    start = timezone.make_aware(datetime.combine(day, datetime.min.time()))
    return start, start + timedelta(days=1)


def _credited_fen(order_ids) -> dict[int, int]:
    """What the ledger credited each order's owner for it (the ``topup:order:<id>`` posting's CASH leg)."""
    keys = {f"topup:order:{order_id}": order_id for order_id in order_ids}
    rows = (
        Entry.objects.filter(transaction__idempotency_key__in=keys, account__kind=LedgerAccount.Kind.CASH)
        .values_list("transaction__idempotency_key")
        .annotate(total=Sum("amount"))
    )
    return {keys[key]: total for key, total in rows}


def reconciliation_run(*, gateway_name: str, day: date) -> ReconciliationRun | None:
    """Compare ``gateway_name``'s bill for ``day`` with the ledger and store the result (replacing that day's).

    Returns ``None`` for a gateway without a statement API (the simulated one). Safe to repeat.
    """
    gateway = gateway_get(gateway_name)
    try:
        lines = gateway.settlements(day=day)
    except GatewayError as exc:
        logger.warning("reconciliation of %s for %s could not run: %s", gateway_name, day, exc)
        run, _ = ReconciliationRun.objects.update_or_create(
            gateway=gateway_name,
            day=day,
            defaults={"ran_at": timezone.now(), "ok": False, "error": str(exc)[:255], "mismatches": []},
        )
        return run
    if lines is None:
        return None
    start, end = _day_bounds(day)
    mismatches: list[dict] = []

    paid: dict[int, int] = defaultdict(int)
    refunded_by_gateway: dict[int, int] = defaultdict(int)
    references: dict[int, str] = {}
    for line in lines:
        if line.order_id is None:
            continue  # another shop on the same merchant account: not the console's money
        target = paid if line.kind == SettledLine.PAYMENT else refunded_by_gateway
        target[line.order_id] += line.amount_fen
        references.setdefault(line.order_id, line.reference)

    ours = set(TopUpOrder.objects.filter(gateway=gateway_name, pk__in=paid).values_list("pk", flat=True))
    paid_in_ledger_today = dict(
        TopUpOrder.objects.filter(gateway=gateway_name, paid_at__gte=start, paid_at__lt=end).values_list(
            "pk", "amount_fen"
        )
    )
    credited = _credited_fen(set(paid) | set(paid_in_ledger_today))
    for order_id, amount in sorted(paid.items()):
        ledger = credited.get(order_id, 0) if order_id in ours else 0
        if ledger != amount:
            mismatches.append(
                {
                    "kind": "not_credited" if not ledger else "amount_differs",
                    "order": order_id,
                    "gateway_fen": amount,
                    "ledger_fen": ledger,
                    "reference": references.get(order_id, ""),
                }
            )
    for order_id in sorted(set(paid_in_ledger_today) - set(paid)):
        mismatches.append(
            {
                "kind": "not_settled",
                "order": order_id,
                "gateway_fen": 0,
                "ledger_fen": credited.get(order_id, 0),
                "reference": "",
            }
        )

    refunded_in_ledger = dict(
        Entry.objects.filter(
            account__kind=LedgerAccount.Kind.GATEWAY,
            transaction__refund__order__gateway=gateway_name,
            transaction__created_at__gte=start,
            transaction__created_at__lt=end,
        )
        .values_list("transaction__refund__order_id")
        .annotate(total=Sum("amount"))
    )
    for order_id in sorted(set(refunded_by_gateway) | set(refunded_in_ledger)):
        if refunded_by_gateway.get(order_id, 0) != refunded_in_ledger.get(order_id, 0):
            mismatches.append(
                {
                    "kind": "refund_differs",
                    "order": order_id,
                    "gateway_fen": refunded_by_gateway.get(order_id, 0),
                    "ledger_fen": refunded_in_ledger.get(order_id, 0),
                    "reference": references.get(order_id, ""),
                }
            )

    settled = sum(paid.values()) - sum(refunded_by_gateway.values())
    ledger_total = sum(credited.get(order_id, 0) for order_id in set(paid) & ours | set(paid_in_ledger_today))
    ledger_total -= sum(refunded_in_ledger.values())
    if mismatches:
        logger.error("reconciliation of %s for %s: %d mismatches", gateway_name, day, len(mismatches))
    run, _ = ReconciliationRun.objects.update_or_create(
        gateway=gateway_name,
        day=day,
        defaults={
            "ran_at": timezone.now(),
            "ok": not mismatches,
            "settled_lines": len(lines),
            "settled_fen": settled,
            "ledger_fen": ledger_total,
            "mismatches": mismatches,
            "error": "",
        },
    )
    return run


def reconciliation_run_all(*, day: date | None = None) -> list[ReconciliationRun]:
    """Reconcile every enabled gateway that has a statement, for ``day`` (yesterday, local time, by default)."""
    day = day or timezone.localdate() - timedelta(days=1)
    runs = [reconciliation_run(gateway_name=gateway.name, day=day) for gateway in gateways_enabled()]
    return [run for run in runs if run is not None]


def reconciliations_recent(*, limit: int = 30):
    """Staff only: the latest reconciliation runs, mismatches first within a day."""
    return ReconciliationRun.objects.order_by("-day", "ok", "gateway")[:limit]
