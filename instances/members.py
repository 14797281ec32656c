"""A team member's own limits inside the team's: cards held at once, and spend per calendar month.

A team's instances belong to the team's account (``Team.account``), so the team's quota and money
apply as they do to a person's. On top of those, ``Membership.gpu_limit`` caps the cards a member's
instances hold at once and ``Membership.spend_limit_fen`` what those instances may spend of the team's
money in a calendar month (``TIME_ZONE``). "A member's instances" are those they launched
(``Instance.created_by``). Launching and starting check both inside the transaction that takes the
cards, after the quota's lock, under a lock of their own on the (team, member) pair, so parallel
launches by one member cannot pass the check together.

This module sits in instances, above teams and billing: teams (below) cannot read instances or the
ledger, so the team page gets its members' spend figures through ``teams.hooks.member_usage``, which
``member_usage`` here answers (``instances/wiring.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db import connection
from django.db.models import F, Q, Sum
from django.utils import timezone
from django.utils.translation import gettext as _

from billing.meter_arithmetic import amount_owed, elapsed_seconds
from billing.models import Entry, LedgerAccount, Meter, Transaction
from billing.statements import month_bounds
from core.formatting import cny
from instances.errors import MemberLimitReached, NotPermitted
from instances.models import Instance
from instances.skus import disk_meter_ref, gpu_meter_ref
from teams.models import Membership
from teams.roles import Permission, membership_can


def _month_start(now: datetime) -> datetime:
    month = timezone.localdate(now, timezone.get_default_timezone()).replace(day=1)
    return month_bounds(month)[0]


def member_spend_this_month(*, account_id: int, user_ids: Iterable[int], now: datetime | None = None) -> dict[int, int]:
    """Per member (of ``user_ids``), what the instances they launched on account ``account_id`` have
    spent this calendar month (fen, positive): the usage settled in the ledger this month, plus what
    their meters owe now and have not been charged yet. Three queries for any number of members.

    The settled part is read from the usage postings' ``ref`` (the meter's resource, as the
    statements' usage lines read it), so it agrees with the team's statement.
    """
    now = now or timezone.now()
    user_ids = list(user_ids)
    start = _month_start(now)
    launched = Instance.objects.filter(owner_id=account_id, created_by_id__in=user_ids).filter(
        ~Q(status=Instance.Status.RELEASED) | Q(status_changed_at__gte=start)
    )
    by_ref: dict[str, int] = {}
    for instance_id, user_id in launched.values_list("id", "created_by_id"):
        by_ref[gpu_meter_ref(instance_id)] = user_id
        by_ref[disk_meter_ref(instance_id)] = user_id
    spent = dict.fromkeys(user_ids, 0)
    if not by_ref:
        return spent
    settled = (
        Entry.objects.filter(
            account__owner_id=account_id,
            account__kind__in=LedgerAccount.USER_KINDS,
            transaction__kind=Transaction.Kind.USAGE,
            transaction__created_at__gte=start,
            transaction__metadata__ref__in=list(by_ref),
        )
        .values("transaction__metadata__ref")
        .annotate(total=Sum("amount"))
        .order_by()
    )
    for row in settled:
        user_id = by_ref.get(row["transaction__metadata__ref"])
        if user_id is not None:
            spent[user_id] += -(row["total"] or 0)
    unsettled = Meter.objects.filter(user_id=account_id, ref__in=list(by_ref)).filter(
        Q(stopped_at__isnull=True) | Q(charged_fen__lt=F("owed_fen"))
    )
    for meter in unsettled.only(
        "ref", "price_fen", "quantity", "unit_seconds", "started_at", "stopped_at", "owed_fen", "charged_fen"
    ):
        owed = meter.owed_fen
        if meter.stopped_at is None:
            seconds = elapsed_seconds(start=meter.started_at, end=now)
            owed = max(
                owed,
                amount_owed(
                    price_fen=meter.price_fen, quantity=meter.quantity, unit_seconds=meter.unit_seconds, seconds=seconds
                ),
            )
        spent[by_ref[meter.ref]] += max(0, owed - meter.charged_fen)
    return spent


def member_cards_held(*, account_id: int, user_id: int) -> int:
    """The cards the instances ``user_id`` launched on ``account_id`` hold now (as quota counts them)."""
    return (
        Instance.objects.filter(
            owner_id=account_id, created_by_id=user_id, status__in=Instance.HOLDING_GPUS, no_gpu=False
        ).aggregate(n=Sum(F("gpu_count") * F("node_count")))["n"]
        or 0
    )


def _member_lock(*, account_id: int, user_id: int) -> None:
    """Serialise one member's launches and starts in one team until the transaction ends (taken after
    the quota's lock, always in that order, so two never wait on each other)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"member:{account_id}:{user_id}"])


def member_limits_check(*, account, member_id: int | None, count: int, launching: bool) -> None:
    """Refuse when the cards ``member_id`` holds in the team plus ``count`` exceed their card limit, or
    their spend this month is at or over their spend limit. Call it inside the transaction that takes
    the cards, after ``quota_check``. Nothing to check on a personal account (``member_id`` is the
    owner, or unknown).

    ``launching``: the member must still be one whose role may launch (a former member, or a billing
    viewer, is refused). A start of someone else's instance by an admin checks its launcher's limits.
    """
    if member_id is None or member_id == account.pk:
        return
    membership = (
        Membership.objects.filter(team__account_id=account.pk, user_id=member_id)
        .only("id", "role", "spend_limit_fen", "gpu_limit")
        .first()
    )
    if membership is None or not membership_can(membership, Permission.RESOURCES_LAUNCH):
        if launching:
            raise NotPermitted(_("Your role in this team does not allow launching instances."))
        return  # its launcher left the team: their limits went with them; the team's quota still applies
    if membership.gpu_limit is None and membership.spend_limit_fen is None:
        return
    _member_lock(account_id=account.pk, user_id=member_id)
    # Read after the lock: a launch that held it has committed its instance.
    if membership.gpu_limit is not None:
        held = member_cards_held(account_id=account.pk, user_id=member_id)
        if held + count > membership.gpu_limit:
            raise MemberLimitReached(
                _(
                    "Your limit in this team is %(limit)d GPU cards at once and your instances hold %(held)d, "
                    "so %(count)d more would exceed it. Ask a team admin to raise it."
                )
                % {"limit": membership.gpu_limit, "held": held, "count": count},
                field="gpu_count",
            )
    if membership.spend_limit_fen is not None:
        spent = member_spend_this_month(account_id=account.pk, user_ids=[member_id]).get(member_id, 0)
        if spent >= membership.spend_limit_fen:
            raise MemberLimitReached(
                _(
                    "Your instances have spent %(spent)s of the team's money this month, which reaches your "
                    "monthly limit of %(limit)s. Ask a team admin to raise it."
                )
                % {"spent": cny(spent), "limit": cny(membership.spend_limit_fen)}
            )


def member_usage(*, account_id: int, user_ids: Iterable[int]) -> dict[int, dict]:
    """Per member, ``{"spent_fen": …, "cards": …}``: this month's spend of their instances in the team
    (``member_spend_this_month``) and the cards those hold now. The team page's members table reads it
    through ``teams.hooks.member_usage``. Four queries for any number of members."""
    user_ids = list(user_ids)
    spent = member_spend_this_month(account_id=account_id, user_ids=user_ids)
    cards = dict(
        Instance.objects.filter(
            owner_id=account_id, created_by_id__in=user_ids, status__in=Instance.HOLDING_GPUS, no_gpu=False
        )
        .values("created_by_id")
        .annotate(n=Sum(F("gpu_count") * F("node_count")))
        .values_list("created_by_id", "n")
        .order_by()
    )
    return {user_id: {"spent_fen": spent.get(user_id, 0), "cards": cards.get(user_id) or 0} for user_id in user_ids}
