"""Reads for invoices: what can still be invoiced (the bounds ``invoices.services`` enforces), and the
pages' lists; every user-facing one is scoped to the user who asks."""

from __future__ import annotations

from datetime import date

from django.db.models import Sum
from django.utils import timezone

from billing.models import Entry, LedgerAccount, TopUpOrder, Transaction
from billing.statements import month_bounds
from invoices.models import InvoiceRequest

Status = InvoiceRequest.Status


def _asked(**filters) -> int:
    return (
        InvoiceRequest.objects.filter(**filters)
        .exclude(status=Status.DECLINED)
        .aggregate(total=Sum("amount_fen"))["total"]
        or 0
    )


def _cash_entries(user, *kinds):
    return Entry.objects.filter(account__owner=user, account__kind=LedgerAccount.Kind.CASH, transaction__kind__in=kinds)


def invoiceable_order_fen(*, order: TopUpOrder) -> int:
    """What of a top-up can still be invoiced: paid, less refunded, less asked for already."""
    if order.status not in (TopUpOrder.Status.PAID, TopUpOrder.Status.PARTIALLY_REFUNDED):
        return 0
    return max(order.amount_fen - order.refunded_fen - _asked(order=order), 0)


def paid_usage_fen(*, user, month: date) -> int:
    """What usage took from the paid balance in ``month`` (trial credit's share is not in it)."""
    start, end = month_bounds(month)
    spent = (
        _cash_entries(user, Transaction.Kind.USAGE)
        .filter(transaction__created_at__gte=start, transaction__created_at__lt=end)
        .aggregate(total=Sum("amount"))["total"]
        or 0
    )
    return max(-spent, 0)


def invoiceable_month_fen(*, user, month: date) -> int:
    """What of a month's paid usage can still be invoiced (months before the current one only)."""
    if month >= timezone.localdate().replace(day=1):
        return 0
    return max(paid_usage_fen(user=user, month=month) - _asked(user=user, kind="usage", month=month), 0)


def invoice_headroom_fen(*, user) -> int:
    """The money the user paid and kept (top-ups less refunds), less everything asked for already."""
    paid = (
        _cash_entries(user, Transaction.Kind.TOPUP, Transaction.Kind.REFUND).aggregate(total=Sum("amount"))["total"]
        or 0
    )
    return max(paid - _asked(user=user), 0)


def invoices_for(*, user):
    return InvoiceRequest.objects.filter(user=user).select_related("order").defer("pdf")


def invoice_get(*, user, invoice_id: int) -> InvoiceRequest:
    """The user's own invoice request, or ``DoesNotExist`` (a stranger's is a 404 by construction)."""
    return InvoiceRequest.objects.get(user=user, pk=invoice_id)


def invoiceable_orders(*, user) -> list[tuple[TopUpOrder, int]]:
    """The user's paid top-ups with something left to invoice, newest first."""
    orders = TopUpOrder.objects.filter(
        user=user, status__in=(TopUpOrder.Status.PAID, TopUpOrder.Status.PARTIALLY_REFUNDED)
    )[:50]
    pairs = [(order, invoiceable_order_fen(order=order)) for order in orders]
    return [(order, fen) for order, fen in pairs if fen > 0]


def invoiceable_months(*, user, months: list[date]) -> list[tuple[date, int]]:
    pairs = [(month, invoiceable_month_fen(user=user, month=month)) for month in months]
    return [(month, fen) for month, fen in pairs if fen > 0]


def invoice_queue():
    """Staff: requests waiting, oldest first; then the latest decided."""
    return InvoiceRequest.objects.select_related("user", "order").defer("pdf").order_by("status", "created_at")
