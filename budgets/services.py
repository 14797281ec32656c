"""Budgets: set one, and the periodic check that alerts and enforces the hard cap.

``budgets_check`` is safe to run twice and at once with itself: an alert is a unique row (user,
month, threshold), inserted before its e-mail goes, so a second run finds it and sends nothing; a
stop only moves instances that still run.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from budgets.models import THRESHOLDS, Budget, BudgetAlert, InstanceCap
from budgets.selectors import instance_spent, month_of, spent_this_month
from core.formatting import cny
from core.messages import reason as stored
from instances.models import Instance
from instances.services import instance_stop
from notifications.models import Kind
from notifications.services import Message, notify
from teams.models import TeamEvent
from teams.services import team_event_record

logger = logging.getLogger(__name__)


def budget_set(*, user, monthly_limit_fen: int | None, hard_cap: bool = False, actor=None) -> Budget | None:
    """Set ``user``'s monthly budget (fen, more than 0), or remove it with ``None``. Alerts already sent
    this month stay sent; a higher budget simply has not reached its new thresholds yet.

    ``user`` is the account (a person's, or a team's); ``actor`` the person who set it, for a team's
    audit log (nothing is written, and nothing queried, in the personal context)."""
    if monthly_limit_fen is not None and monthly_limit_fen <= 0:
        raise ValueError("a budget is more than 0 fen")
    with transaction.atomic():
        if monthly_limit_fen is None:
            Budget.objects.filter(user=user).delete()
            budget = None
        else:
            budget, _created = Budget.objects.update_or_create(
                user=user, defaults={"monthly_limit_fen": monthly_limit_fen, "hard_cap": hard_cap}
            )
        if actor is not None and actor.pk != user.pk:
            team_event_record(
                account=user,
                actor=actor,
                action=TeamEvent.Action.BUDGET_CHANGED,
                target="",
                details={"monthly_limit_fen": monthly_limit_fen, "hard_cap": bool(hard_cap and budget)},
            )
    return budget


def instance_cap_set(*, instance: Instance, limit_fen: int | None) -> InstanceCap | None:
    """ "Stop this one after ¥X" (fen, more than 0), or no limit with ``None``. A new limit is told
    again when reached."""
    if limit_fen is None:
        InstanceCap.objects.filter(instance=instance).delete()
        return None
    if limit_fen <= 0:
        raise ValueError("a spending limit is more than 0 fen")
    cap, _created = InstanceCap.objects.update_or_create(
        instance=instance, defaults={"limit_fen": limit_fen, "reached_at": None}
    )
    return cap


def spend_guard(*, user, instance: Instance | None = None) -> str | None:
    """``instances.hooks.spend_guard``: why compute may not start now (a hard-capped budget reached this
    month; for a start, the instance's own spending limit reached), or None. A few queries, asked at
    each launch and start."""
    if instance is not None:
        cap = InstanceCap.objects.filter(instance=instance).first()
        if cap is not None and instance_spent(instance_ids=[instance.pk]).get(str(instance.pk), 0) >= cap.limit_fen:
            return _(
                "This instance has spent its limit of %(limit)s. Raise or remove the limit on its page to start it."
            ) % {"limit": cny(cap.limit_fen)}
    limit_fen = Budget.objects.filter(user=user, hard_cap=True).values_list("monthly_limit_fen", flat=True).first()
    if limit_fen is None:
        return None
    spent = spent_this_month(user_ids=[user.pk], now=timezone.now()).get(user.pk, 0)
    if spent < limit_fen:
        return None
    return _(
        "This month's budget of %(limit)s is reached and its hard cap stops compute. Raise the budget "
        "to launch or start instances."
    ) % {"limit": cny(limit_fen)}


def budgets_check(*, now: datetime | None = None) -> dict[str, int]:
    """Alert each budget's newly crossed thresholds once this month; with the hard cap, stop the user's
    running instances (disks kept) while the month's spending is at or over the budget."""
    now = now or timezone.now()
    month = month_of(now)
    budgets = list(Budget.objects.select_related("user"))
    spent = spent_this_month(user_ids=[b.user_id for b in budgets], now=now)
    report = {"alerts": 0, "stopped": 0}
    for budget in budgets:
        used = spent.get(budget.user_id, 0)
        for threshold in THRESHOLDS:
            if used * 100 >= budget.monthly_limit_fen * threshold and _alert(budget, month, threshold, used):
                report["alerts"] += 1
        if budget.hard_cap and used >= budget.monthly_limit_fen:
            report["stopped"] += _stop_compute(budget)
    report["stopped"] += _instance_caps_check()
    return report


def _instance_caps_check() -> int:
    """Stop each running instance that spent its own limit (its owner told once per limit)."""
    caps = list(InstanceCap.objects.filter(instance__status=Instance.Status.RUNNING).select_related("instance__owner"))
    spent = instance_spent(instance_ids=[c.instance_id for c in caps])
    stopped = 0
    for cap in caps:
        used = spent.get(str(cap.instance_id), 0)
        if used < cap.limit_fen:
            continue
        instance = cap.instance
        instance_stop(
            instance=instance,
            reason=stored(
                gettext_noop("Stopped: it spent its limit of %(limit)s; the disk is kept."),
                limit=cny(cap.limit_fen),
            ),
        )
        stopped += 1
        if InstanceCap.objects.filter(pk=cap.pk, reached_at__isnull=True).update(reached_at=timezone.now()):
            values = {"name": instance.name, "limit": cny(cap.limit_fen)}
            notify(
                user=instance.owner,
                kind=Kind.INSTANCE_LIMIT_REACHED,
                render=lambda values=values: _limit_message(values),
                link=f"/instances/{instance.pk}/",
                data={"instance_id": str(instance.pk), "instance_name": instance.name, "limit_fen": cap.limit_fen},
            )
    return stopped


def _limit_message(values: dict) -> Message:
    title = _("%(name)s was stopped: it spent its limit of %(limit)s") % values
    return Message(title=title, body=title)


def _alert(budget: Budget, month, threshold: int, used: int) -> bool:
    """Record the alert; True (and the owner told) only for the run that recorded it."""
    try:
        with transaction.atomic():
            BudgetAlert.objects.create(
                user=budget.user, month=month, threshold=threshold, spent_fen=used, limit_fen=budget.monthly_limit_fen
            )
    except IntegrityError:
        return False  # sent already (this run's twin, or an earlier one)
    values = {"pct": threshold, "spent": cny(used), "limit": cny(budget.monthly_limit_fen)}

    def render() -> Message:
        if threshold >= 100:
            subject = _("You have reached your monthly budget of %(limit)s") % values
            body = (
                _(
                    "This month you have spent %(spent)s, your whole budget of %(limit)s. Your running instances were stopped (their disks are kept)."
                )
                if budget.hard_cap
                else _(
                    "This month you have spent %(spent)s, your whole budget of %(limit)s. Nothing was stopped: the budget has no hard cap."
                )
            ) % values
        else:
            subject = _("You have spent %(pct)d%% of your monthly budget") % values
            body = _("This month you have spent %(spent)s of your %(limit)s budget (%(pct)d%%).") % values
        return Message(title=subject, body=body)

    notify(
        user=budget.user,
        kind=Kind.BUDGET_REACHED if threshold >= 100 else Kind.BUDGET_THRESHOLD,
        render=render,
        link="/billing/budget/",
        data={
            "threshold_percent": threshold,
            "spent_fen": used,
            "limit_fen": budget.monthly_limit_fen,
            "hard_cap": budget.hard_cap,
        },
    )
    return True


def _stop_compute(budget: Budget) -> int:
    """Stop the user's running instances, keeping their disks (storage keeps billing, as out of funds)."""
    stopped = 0
    for instance in Instance.objects.filter(owner_id=budget.user_id, status=Instance.Status.RUNNING):
        instance_stop(
            instance=instance,
            reason=stored(
                gettext_noop(
                    "Stopped: this month's budget of %(limit)s was reached; the disk is kept. Raise the budget to start it again."
                ),
                limit=cny(budget.monthly_limit_fen),
            ),
        )
        stopped += 1
    return stopped
