"""Billing's reads, scoped to the user who asks. They import no service: services call them, not back."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta

from django.db import connection
from django.db.models import F, Q, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from billing.meter_arithmetic import amount_owed, elapsed_seconds
from billing.models import BalanceAlert, Entry, LedgerAccount, LedgerCheckRun, Meter, Refund, TopUpOrder, Transaction

Kind = LedgerAccount.Kind


@dataclass(frozen=True)
class Balance:
    cash: int
    trial: int

    @property
    def total(self) -> int:
        return self.cash + self.trial


def balance_get(*, user) -> Balance:
    rows = dict(
        LedgerAccount.objects.filter(owner=user, kind__in=LedgerAccount.USER_KINDS).values_list("kind", "balance")
    )
    return Balance(cash=rows.get(Kind.CASH, 0), trial=rows.get(Kind.TRIAL, 0))


@dataclass(frozen=True)
class Runway:
    """How long the balance lasts at the current rate of spend."""

    balance_fen: int  # spendable now: trial credit plus paid money, less what the meters still owe
    burn_fen_per_hour: int  # what the user's open meters cost per hour together
    owed_fen: int  # used but not yet charged: settled at the next tick, or debt awaiting a top-up

    @property
    def seconds(self) -> int | None:
        """Seconds until the balance is spent; ``None`` when nothing is running."""
        if self.burn_fen_per_hour <= 0:
            return None
        return max(0, self.balance_fen * 3600 // self.burn_fen_per_hour)


_METER_FIELDS = (
    "user_id",
    "price_fen",
    "quantity",
    "unit_seconds",
    "started_at",
    "stopped_at",
    "charged_fen",
    "owed_fen",
)
_UNSETTLED = Q(stopped_at__isnull=True) | Q(charged_fen__lt=F("owed_fen"))


def _runway(*, total_fen: int, meters, now: datetime) -> Runway:
    burn_numerator = 0  # fen × seconds-per-hour, summed exactly before one division
    owed = 0
    for m in meters:
        if m["stopped_at"] is None:
            burn_numerator += m["price_fen"] * m["quantity"] * 3600 * 10_000 // m["unit_seconds"]
            seconds = elapsed_seconds(start=m["started_at"], end=now)
            so_far = amount_owed(
                price_fen=m["price_fen"], quantity=m["quantity"], unit_seconds=m["unit_seconds"], seconds=seconds
            )
            owed += max(0, max(so_far, m["owed_fen"]) - m["charged_fen"])
        else:  # stopped but not paid for in full: debt
            owed += max(0, m["owed_fen"] - m["charged_fen"])
    burn = (burn_numerator + 9_999) // 10_000
    return Runway(balance_fen=total_fen - owed, burn_fen_per_hour=burn, owed_fen=owed)


# --- What the billing pages and the API read ------------------------------------------------------


def transactions_for(*, user, kind: str | None = None):
    """The user's transactions, newest first, each annotated with what it did to the user's wallet.

    ``amount_fen`` is the change of the user's total balance, ``cash_fen``/``trial_fen`` the change of
    each account (which one a posting affected). One query, so it pages cheaply.
    """
    mine = Q(entries__account__owner=user)
    # A transfer names its payer in ``user``; the payee finds it through its own entries.
    received = Entry.objects.filter(account__owner=user, transaction__kind=Transaction.Kind.TRANSFER)
    qs = (
        Transaction.objects.filter(Q(user=user) | Q(pk__in=received.values("transaction_id")))
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
    return TopUpOrder.objects.filter(user=user).order_by("-created_at", "-id")


def topup_order_get(*, user, order_id: int):
    """The user's order ``order_id``; another user's is ``DoesNotExist`` (a 404), by construction."""
    return topup_orders_for(user=user).get(pk=order_id)


def spend_per_day(*, user, days: int = 30, now=None) -> list[tuple]:
    """``[(date, fen spent on usage that day), …]`` for the last ``days`` days (today last), in TIME_ZONE."""
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


def runway_get(*, user, now: datetime | None = None) -> Runway:
    """The user's runway: balance less what is owed, and the hourly burn of what runs.

    One plain SQL statement for the balance and the unsettled meters (``_UNSETTLED``) together: every
    page's banner and every launch read this, and the ORM took longer building the two queries than
    PostgreSQL took running them.
    """
    now = now or timezone.now()
    qn = connection.ops.quote_name
    columns = _METER_FIELDS[1:]  # those of one user: not user_id
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT b.total, {', '.join(f'm.{qn(c)}' for c in columns)}"  # noqa: S608
            f" FROM (SELECT COALESCE(SUM(balance), 0) AS total FROM {qn(LedgerAccount._meta.db_table)}"
            f" WHERE owner_id = %s AND kind = ANY(%s)) b"
            f" LEFT JOIN {qn(Meter._meta.db_table)} m"
            " ON m.user_id = %s AND (m.stopped_at IS NULL OR m.charged_fen < m.owed_fen)",
            [user.pk, list(LedgerAccount.USER_KINDS), user.pk],
        )
        rows = cursor.fetchall()
    meters = [dict(zip(columns, row[1:], strict=True)) for row in rows if row[1] is not None]
    return _runway(total_fen=int(rows[0][0]), meters=meters, now=now)  # SUM of bigint is numeric


def runways_all(*, now: datetime | None = None) -> dict[int, Runway]:
    """The runway of every user with a meter running or owing, in two queries (for the watcher)."""
    now = now or timezone.now()
    by_user: dict[int, list[dict]] = {}
    for m in Meter.objects.filter(_UNSETTLED).values(*_METER_FIELDS).iterator(chunk_size=5000):
        by_user.setdefault(m["user_id"], []).append(m)
    totals: dict[int, int] = {}
    for owner_id, balance in LedgerAccount.objects.filter(
        owner_id__in=Meter.objects.filter(_UNSETTLED).values("user_id"), kind__in=LedgerAccount.USER_KINDS
    ).values_list("owner_id", "balance"):
        totals[owner_id] = totals.get(owner_id, 0) + balance
    return {
        user_id: _runway(total_fen=totals.get(user_id, 0), meters=meters, now=now)
        for user_id, meters in by_user.items()
    }


def low_balance_warning_active(*, user) -> bool:
    """True while the user's runway is below ``BILLING_LOW_BALANCE_WARNING_S`` (the banner's switch).

    Set by the watcher (``billing.alerts.balance_alerts_update``, every tick) when the warning e-mail
    goes out; cleared when the user tops up or nothing runs any more.
    """
    return BalanceAlert.objects.filter(user=user, kind=BalanceAlert.Kind.LOW, resolved_at__isnull=True).exists()


def out_of_funds_since(*, user) -> datetime | None:
    """When the user's money ran out, while it still is; ``None`` otherwise (for a red banner)."""
    alert = (
        BalanceAlert.objects.filter(user=user, kind=BalanceAlert.Kind.EXHAUSTED, resolved_at__isnull=True)
        .only("started_at")
        .first()
    )
    return alert.started_at if alert else None


def trial_grant_key(*, user_id: int) -> str:
    """The idempotency key of a user's one trial grant: ``trial_claim`` posts it, ``trial_claimed`` looks for it."""
    return f"trial:grant:{user_id}"


def trial_claimed(*, user) -> bool:
    return Transaction.objects.filter(idempotency_key=trial_grant_key(user_id=user.pk)).exists()


def ledger_checks_recent(*, limit: int = 20):
    """Staff only: the latest ledger checks, newest first."""
    return LedgerCheckRun.objects.all()[:limit]


def adjustments_recent(*, limit: int = 50):
    """Staff only: the latest balance adjustments, with who made them and for whom."""
    return (
        Transaction.objects.filter(kind=Transaction.Kind.ADJUSTMENT)
        .select_related("user", "created_by")
        .prefetch_related("entries__account")[:limit]
    )


def refunds_recent(*, limit: int = 50):
    """Staff only: the latest refunds, with their order, payer, author and the gateway's refund id."""
    return Refund.objects.select_related("order__user", "created_by")[:limit]


def meters_charged_in_ledger(*, meter_ids) -> dict[int, int]:
    """What the ledger holds as charged for each meter: its usage postings' net to the revenue accounts
    (a stop's give-back included). Equal to the meter's ``charged_fen`` when every settlement posted once."""
    rows = (
        Entry.objects.filter(
            transaction__kind=Transaction.Kind.USAGE,
            transaction__metadata__meter__in=list(meter_ids),
            account__kind__in=[LedgerAccount.Kind.REVENUE, LedgerAccount.Kind.TRIAL_REVENUE],
        )
        .values_list("transaction__metadata__meter")
        .annotate(total=Sum("amount"))
    )
    return {int(meter): total for meter, total in rows}
