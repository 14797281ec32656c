"""Billing's reads, scoped to the user who asks."""

from __future__ import annotations

from dataclasses import dataclass

from billing.models import Meter
from billing.services import balance_get


@dataclass(frozen=True)
class Runway:
    """How long the balance lasts at the current rate of spend."""

    balance_fen: int  # spendable now: trial credit plus paid money, less what open meters still owe
    burn_fen_per_hour: int  # what the user's open meters cost per hour together
    owed_fen: int  # used but not yet charged (settled at the next tick)

    @property
    def seconds(self) -> int | None:
        """Seconds until the balance is spent; ``None`` when nothing is running."""
        if self.burn_fen_per_hour <= 0:
            return None
        return max(0, self.balance_fen * 3600 // self.burn_fen_per_hour)


def runway_get(*, user, now=None) -> Runway:
    from django.utils import timezone

    from billing.services import amount_owed

    now = now or timezone.now()
    balance = balance_get(user=user)
    burn_numerator = 0  # fen × seconds-per-hour, summed exactly before one division
    owed = 0
    for meter in Meter.objects.filter(user=user, stopped_at__isnull=True).only(
        "price_fen", "quantity", "unit_seconds", "started_at", "charged_fen"
    ):
        burn_numerator += meter.price_fen * meter.quantity * 3600 * 10_000 // meter.unit_seconds
        seconds = max(0, int((now - meter.started_at).total_seconds()))
        owed += max(
            0,
            amount_owed(
                price_fen=meter.price_fen, quantity=meter.quantity, unit_seconds=meter.unit_seconds, seconds=seconds
            )
            - meter.charged_fen,
        )
    burn = (burn_numerator + 9_999) // 10_000
    return Runway(balance_fen=balance.total - owed, burn_fen_per_hour=burn, owed_fen=owed)


# --- What the billing pages and the API read ------------------------------------------------------


def transactions_for(*, user, kind: str | None = None):
    """The user's transactions, newest first, each annotated with what it did to the user's wallet.

    ``amount_fen`` is the change of the user's total balance, ``cash_fen``/``trial_fen`` the change of
    each account (which one a posting affected). One query, so it pages cheaply.
    """
    from django.db.models import Q, Sum

    from billing.models import LedgerAccount, Transaction

    mine = Q(entries__account__owner=user)
    qs = (
        Transaction.objects.filter(user=user)
        .annotate(
            amount_fen=Sum("entries__amount", filter=mine),
            cash_fen=Sum("entries__amount", filter=mine & Q(entries__account__kind=LedgerAccount.Kind.CASH)),
            trial_fen=Sum("entries__amount", filter=mine & Q(entries__account__kind=LedgerAccount.Kind.TRIAL)),
        )
        .order_by("-created_at", "-id")
    )
    if kind:
        qs = qs.filter(kind=kind)
    return qs


def topup_orders_for(*, user):
    from billing.models import TopUpOrder

    return TopUpOrder.objects.filter(user=user).order_by("-created_at", "-id")


def topup_order_get(*, user, order_id: int):
    """The user's order ``order_id``; another user's is ``DoesNotExist`` (a 404), by construction."""
    return topup_orders_for(user=user).get(pk=order_id)


def spend_per_day(*, user, days: int = 30, now=None) -> list[tuple]:
    """``[(date, fen spent on usage that day), …]`` for the last ``days`` days (today last), in TIME_ZONE."""
    from datetime import datetime, time, timedelta

    from django.db.models import Sum
    from django.db.models.functions import TruncDate
    from django.utils import timezone

    from billing.models import Entry, LedgerAccount, Transaction

    tz = timezone.get_default_timezone()
    today = timezone.localtime(now or timezone.now(), tz).date()
    first = today - timedelta(days=days - 1)
    since = datetime.combine(first, time.min, tzinfo=tz)
    rows = (
        Entry.objects.filter(
            account__owner=user,
            account__kind__in=LedgerAccount.USER_KINDS,
            transaction__kind=Transaction.Kind.USAGE,
            transaction__created_at__gte=since,
        )
        .annotate(day=TruncDate("transaction__created_at", tzinfo=tz))
        .values("day")
        .annotate(total=Sum("amount"))
        .order_by()
    )
    spent = {row["day"]: -row["total"] for row in rows}
    return [(first + timedelta(days=i), spent.get(first + timedelta(days=i), 0)) for i in range(days)]
