"""Monthly statements: what the wallet held, what came in and went out, and every usage line.

Months are calendar months in ``TIME_ZONE``. Every figure is a sum of ledger entries on the user's
own accounts (cash and trial credit), so a statement always agrees with the ledger: the usage lines
sum to the usage total, and opening + movements = closing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.db.models import BigIntegerField, Max, Min, Q, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, TruncMonth
from django.utils import timezone

from billing import hooks
from billing.models import Entry, LedgerAccount, Meter, Transaction

TxKind = Transaction.Kind

_MONTH = re.compile(r"^(\d{4})-(\d{2})$")


def month_parse(text: str) -> date | None:
    """``"2026-11"`` → ``date(2026, 11, 1)``; anything else (``2026-13``, garbage) → ``None``."""
    match = _MONTH.match(text or "")
    if not match:
        return None
    year, month = int(match.group(1)), int(match.group(2))
    if not (1 <= month <= 12 and 2000 <= year <= 9999):
        return None
    return date(year, month, 1)


def _next_month(month: date) -> date:
    return date(month.year + (month.month == 12), month.month % 12 + 1, 1)


def month_bounds(month: date) -> tuple[datetime, datetime]:
    tz = timezone.get_default_timezone()
    start = datetime(month.year, month.month, 1, tzinfo=tz)
    end_month = _next_month(month)
    return start, datetime(end_month.year, end_month.month, 1, tzinfo=tz)


def _current_month() -> date:
    return timezone.localdate(timezone.now(), timezone.get_default_timezone()).replace(day=1)


def _user_entries(user):
    return Entry.objects.filter(account__owner=user, account__kind__in=LedgerAccount.USER_KINDS)


@dataclass
class MonthSummary:
    """One month of a wallet (cash and trial credit together), in fen. Outflows are positive numbers."""

    month: date
    opening_fen: int = 0
    topups_fen: int = 0
    refunds_fen: int = 0  # paid money sent back (positive: money out)
    adjustments_fen: int = 0  # staff corrections (signed)
    trial_fen: int = 0  # trial credit granted less trial credit expired (signed)
    usage_fen: int = 0  # spent on usage (positive: money out)
    transfers_fen: int = 0  # paid money moved in from (or, if negative, out to) another wallet

    @property
    def key(self) -> str:
        return f"{self.month:%Y-%m}"

    @property
    def closing_fen(self) -> int:
        return (
            self.opening_fen
            + self.topups_fen
            - self.refunds_fen
            + self.adjustments_fen
            + self.trial_fen
            - self.usage_fen
            + self.transfers_fen
        )

    def add(self, kind: str, amount: int) -> None:
        if kind == TxKind.TOPUP:
            self.topups_fen += amount
        elif kind == TxKind.REFUND:
            self.refunds_fen -= amount
        elif kind == TxKind.USAGE:
            self.usage_fen -= amount
        elif kind in (TxKind.TRIAL_GRANT, TxKind.TRIAL_EXPIRY):
            self.trial_fen += amount
        elif kind == TxKind.TRANSFER:
            self.transfers_fen += amount
        else:
            self.adjustments_fen += amount


def statement_months(*, user) -> list[MonthSummary]:
    """Every month from the user's first ledger movement to this month, newest first. One query."""
    tz = timezone.get_default_timezone()
    rows = list(
        _user_entries(user)
        .annotate(month=TruncMonth("transaction__created_at", tzinfo=tz))
        .values("month", "transaction__kind")
        .annotate(total=Sum("amount"))
        .order_by("month")
    )
    if not rows:
        return []
    by_month: dict[date, MonthSummary] = {}
    for row in rows:
        month = timezone.localtime(row["month"], tz).date() if isinstance(row["month"], datetime) else row["month"]
        by_month.setdefault(month, MonthSummary(month=month)).add(row["transaction__kind"], row["total"])
    months, month, balance = [], min(by_month), 0
    last = max(_current_month(), max(by_month))
    while month <= last:
        summary = by_month.get(month) or MonthSummary(month=month)
        summary.opening_fen = balance
        balance = summary.closing_fen
        months.append(summary)
        month = _next_month(month)
    return months[::-1]


@dataclass
class UsageLine:
    """One meter's usage charged within a month: the resource, when, how long, at what rate, for how much."""

    meter_id: int | None
    description: str
    ref: str
    unit: str
    quantity: int
    price_fen: int  # per unit (per card-hour, per GB-day…) per unit of quantity
    start: datetime | None
    end: datetime | None
    seconds: int
    amount_fen: int
    # Whose and what: filled by ``billing.hooks.usage_attribution`` (the instance and who launched it).
    resource_key: str = ""  # the resource this meter measured ("instance:<id>"); the ref when unknown
    resource_label: str = ""  # its name for people
    member_id: int | None = None  # the person who launched it (in a team), when known
    member_label: str = ""

    @property
    def rate_fen(self) -> int:
        """The price per unit for the whole quantity (2 cards at ¥1.90/card-hour → ¥3.80/h)."""
        return self.price_fen * self.quantity


@dataclass
class Statement:
    summary: MonthSummary
    lines: list[UsageLine] = field(default_factory=list)
    # What was spent while GPUs sat idle, per instance (``billing.hooks.idle_waste``): part of the usage
    # above, shown so the owner sees what auto-stop would have saved. Each has ``name``, ``ref``,
    # ``idle_seconds`` and ``amount_fen``.
    idle_lines: list = field(default_factory=list)

    @property
    def idle_total_fen(self) -> int:
        return sum(line.amount_fen for line in self.idle_lines)

    @property
    def lines_total_fen(self) -> int:
        return sum(line.amount_fen for line in self.lines)

    @property
    def by_member(self) -> list[Breakdown]:
        """Usage per person who launched it, largest first; what no person is known for is one row."""
        return _group(self.lines, key=lambda line: (line.member_id, line.member_label))

    @property
    def by_resource(self) -> list[Breakdown]:
        """Usage per resource (an instance's GPU and disk meters together), largest first."""
        return _group(self.lines, key=lambda line: (line.resource_key or line.ref, line.resource_label or line.ref))


@dataclass
class Breakdown:
    """One row of a statement's breakdown: usage grouped by a person or a resource, in fen."""

    key: object  # the member's id (None: not known) or the resource's key
    label: str
    amount_fen: int = 0
    seconds: int = 0
    lines: int = 0
    member_label: str = ""  # for a resource: who launched it


def _group(lines: list[UsageLine], *, key) -> list[Breakdown]:
    rows: dict[object, Breakdown] = {}
    for line in lines:
        group, label = key(line)
        row = rows.setdefault(group, Breakdown(key=group, label=label, member_label=line.member_label))
        row.amount_fen += line.amount_fen
        row.seconds += line.seconds
        row.lines += 1
    return sorted(rows.values(), key=lambda row: (-row.amount_fen, str(row.label)))


def usage_attribute(*, user, lines: list[UsageLine]) -> None:
    """Fill each line's resource and member from the apps answering ``billing.hooks.usage_attribution``.

    Billing knows meters by their ``ref`` only; the app that opened a meter knows what it measured and
    who launched it. Each hook is called as ``hook(user=…, refs=[…])`` and answers ``{ref: {"resource_key",
    "resource_label", "member_id", "member_label"}}`` for the refs it knows (one query each).
    """
    refs = sorted({line.ref for line in lines if line.ref})
    found: dict[str, dict] = {}
    if refs:
        for answer in hooks.usage_attribution(user=user, refs=refs):
            found.update(answer)
    for line in lines:
        info = found.get(line.ref) or {}
        line.resource_key = info.get("resource_key") or line.ref
        line.resource_label = info.get("resource_label") or line.description or line.ref
        line.member_id = info.get("member_id")
        line.member_label = info.get("member_label") or ""


def statement_get(*, user, month: date) -> Statement:
    """The statement of ``month`` for ``user``: the summary, one usage line per meter and the idle-waste
    lines. Four queries, and the idle-waste hook's."""
    start, end = month_bounds(month)
    summary = MonthSummary(month=month)
    summary.opening_fen = (
        _user_entries(user).filter(transaction__created_at__lt=start).aggregate(total=Sum("amount"))["total"] or 0
    )
    in_month = _user_entries(user).filter(transaction__created_at__gte=start, transaction__created_at__lt=end)
    for row in in_month.values("transaction__kind").annotate(total=Sum("amount")).order_by():
        summary.add(row["transaction__kind"], row["total"])
    lines = usage_lines(user=user, start=start, end=end)
    usage_attribute(user=user, lines=lines)
    return Statement(
        summary=summary,
        lines=lines,
        idle_lines=idle_waste(user=user, start=start, end=end),
    )


def idle_waste(*, user, start: datetime, end: datetime) -> list:
    """The idle-waste lines of ``[start, end)``, from the app answering ``billing.hooks.idle_waste`` (GPU
    use is measured above billing, by ``metrics``); none without one."""
    return list(hooks.idle_waste(user=user, start=start, end=end))


def usage_lines(*, user, start: datetime, end: datetime) -> list[UsageLine]:
    """Usage charged in ``[start, end)``, aggregated per meter in SQL from the postings' metadata."""
    mine = Q(entries__account__owner=user, entries__account__kind__in=LedgerAccount.USER_KINDS)
    rows = list(
        Transaction.objects.filter(user=user, kind=TxKind.USAGE, created_at__gte=start, created_at__lt=end)
        .annotate(
            meter_id=Cast(KT("metadata__meter"), BigIntegerField()),
            from_s=Cast(KT("metadata__from_seconds"), BigIntegerField()),
            to_s=Cast(KT("metadata__to_seconds"), BigIntegerField()),
        )
        .values("meter_id")
        .annotate(
            amount=Sum("entries__amount", filter=mine),
            first=Min("from_s"),
            last=Max("to_s"),
            ref=Max(KT("metadata__ref")),
        )
        .order_by()
    )
    meters = Meter.objects.filter(user=user, pk__in=[r["meter_id"] for r in rows if r["meter_id"]]).select_related(
        "sku"
    )
    meters = {m.pk: m for m in meters}
    lines = []
    for row in rows:
        meter = meters.get(row["meter_id"])
        first, last = row["first"] or 0, row["last"] or 0
        if meter is None:  # a usage posting without a meter (should not happen): still listed, so totals agree
            lines.append(UsageLine(row["meter_id"], "", row["ref"] or "", "", 0, 0, None, None, 0, -row["amount"]))
            continue
        lines.append(
            UsageLine(
                meter_id=meter.pk,
                description=meter.description,
                ref=meter.ref,
                unit=meter.sku.unit,
                quantity=meter.quantity,
                price_fen=meter.price_fen,
                start=meter.started_at + timedelta(seconds=first),
                end=meter.started_at + timedelta(seconds=last),
                seconds=max(0, last - first),
                amount_fen=-row["amount"],
            )
        )
    lines.sort(key=lambda line: (line.start is None, line.start or start, line.meter_id or 0))
    return lines


def fen_to_decimal_string(fen: int) -> str:
    """``-12345`` → ``"-123.45"``: a machine-readable yuan amount, computed from the integer."""
    sign = "-" if fen < 0 else ""
    yuan, cents = divmod(abs(int(fen)), 100)
    return f"{sign}{yuan}.{cents:02d}"
