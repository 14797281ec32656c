"""Reading budgets: what a user spent this month, against the budget."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime

from django.db.models import Sum
from django.utils import timezone

from billing.models import Entry, LedgerAccount, Meter, Transaction
from billing.statements import month_bounds
from budgets.models import Budget, BudgetAlert, InstanceCap
from instances.skus import disk_meter_ref, gpu_meter_ref


def month_of(now: datetime) -> date:
    """The first day of ``now``'s month in ``TIME_ZONE`` (as statements count months)."""
    return timezone.localdate(now, timezone.get_default_timezone()).replace(day=1)


def spent_this_month(*, user_ids: Iterable[int], now: datetime) -> dict[int, int]:
    """Per user, the usage charged this month (fen, positive): one query for all of them."""
    start, end = month_bounds(month_of(now))
    rows = (
        Entry.objects.filter(
            account__owner_id__in=list(user_ids),
            account__kind__in=LedgerAccount.USER_KINDS,
            transaction__kind=Transaction.Kind.USAGE,
            transaction__created_at__gte=start,
            transaction__created_at__lt=end,
        )
        .values("account__owner_id")
        .annotate(total=Sum("amount"))
        .order_by()
    )
    return {row["account__owner_id"]: -(row["total"] or 0) for row in rows}


@dataclass(frozen=True)
class BudgetStatus:
    budget: Budget | None
    spent_fen: int
    alerts: tuple[int, ...]  # thresholds already alerted this month

    @property
    def percent(self) -> int | None:
        if self.budget is None:
            return None
        return self.spent_fen * 100 // self.budget.monthly_limit_fen

    @property
    def left_fen(self) -> int | None:
        return None if self.budget is None else max(0, self.budget.monthly_limit_fen - self.spent_fen)

    @property
    def reached(self) -> bool:
        return self.budget is not None and self.spent_fen >= self.budget.monthly_limit_fen


def budget_status_for(*, user, now: datetime | None = None) -> BudgetStatus:
    now = now or timezone.now()
    budget = Budget.objects.filter(user=user).first()
    alerts = tuple(
        BudgetAlert.objects.filter(user=user, month=month_of(now))
        .order_by("threshold")
        .values_list("threshold", flat=True)
    )
    return BudgetStatus(
        budget=budget, spent_fen=spent_this_month(user_ids=[user.pk], now=now).get(user.pk, 0), alerts=alerts
    )


def instance_spent(*, instance_ids: Iterable) -> dict:
    """Per instance, what its GPU and disk meters have used all its life (fen, as of the last
    settlement): one query for all of them."""
    ids = [str(i) for i in instance_ids]
    refs = {gpu_meter_ref(i): i for i in ids} | {disk_meter_ref(i): i for i in ids}
    spent: dict = {}
    for row in Meter.objects.filter(ref__in=list(refs)).values("ref").annotate(total=Sum("owed_fen")).order_by():
        key = refs[row["ref"]]
        spent[key] = spent.get(key, 0) + (row["total"] or 0)
    return spent


def instance_cap_for(*, instance) -> tuple[InstanceCap | None, int]:
    """The instance's spending limit (or None) and what it has spent."""
    cap = InstanceCap.objects.filter(instance=instance).first()
    return cap, instance_spent(instance_ids=[instance.pk]).get(str(instance.pk), 0)
