"""Billing's verbs: post to the ledger, open and close meters, settle what a meter owes.

Other apps call these and nothing else: ``sku_upsert``, ``meter_start``, ``meter_stop``. Billing never
imports them back; when a user's money runs out it calls the hook ``billing.hooks.out_of_funds``
(``billing/alerts.py``), which the instances app answers.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, DateTimeField, F, Q, Sum, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone
from django.utils.translation import gettext as _

from billing.access import is_team_account
from billing.meter_arithmetic import amount_owed, elapsed_seconds
from billing.models import Entry, LedgerAccount, LedgerCheckRun, Meter, Sku, Transaction

# Balance and balance_get are reads (billing.selectors): importable from here only for the callers not
# moved yet (storage's tests). New code imports them from billing.selectors.
from billing.selectors import Balance, balance_get, runway_get, trial_grant_key  # noqa: F401
from core.pgarray import bigint_array
from identity.errors import TrialRefused
from identity.services import trial_person_keys, trial_persons_claim

logger = logging.getLogger(__name__)

Kind = LedgerAccount.Kind


class BillingError(Exception):
    """Base of billing's refusals; ``code`` is machine-readable, the message is for people."""

    code = "billing_error"


class InsufficientFunds(BillingError):
    code = "insufficient_funds"


class UnbalancedTransaction(BillingError):
    code = "unbalanced_transaction"


class TrialNotWithdrawable(BillingError):
    """Trial credit only pays for usage or returns to its pool: never cash, never a refund."""

    code = "trial_not_withdrawable"


# Where trial credit may go. This is THE place that keeps trial credit from being refunded or paid
# out as cash: every posting (refunds included) passes through ``_check_trial_flows``.
TRIAL_OUTLETS = frozenset({Kind.TRIAL_REVENUE, Kind.TRIAL_POOL})


# --- Accounts -------------------------------------------------------------------------------------


def account_get(*, user=None, kind: str) -> LedgerAccount:
    """The user's account of ``kind`` (or the platform's, for system kinds), created on first use."""
    if user is None:
        if kind in LedgerAccount.USER_KINDS:
            raise ValueError(f"{kind} accounts belong to a user")
        defaults = {"floor": None}
    else:
        if kind not in LedgerAccount.USER_KINDS:
            raise ValueError(f"{kind} is a platform account")
        defaults = {"floor": 0}
    account = LedgerAccount.objects.filter(kind=kind, owner=user).first()
    if account is not None:
        return account
    try:
        with transaction.atomic():
            return LedgerAccount.objects.create(kind=kind, owner=user, **defaults)
    except IntegrityError:  # created concurrently: use theirs
        return LedgerAccount.objects.get(kind=kind, owner=user)


# --- Posting --------------------------------------------------------------------------------------


def ledger_post(
    *,
    key: str,
    kind: str,
    legs: list[tuple[LedgerAccount, int]],
    user=None,
    description: str = "",
    metadata: dict | None = None,
    created_by=None,
) -> tuple[Transaction, bool]:
    """Post one balanced transaction, at most once per ``key``.

    Returns ``(transaction, created)``; a repeat of a key returns the first transaction and posts
    nothing. The accounts are locked in id order (no deadlocks between two postings), the key is
    checked after the locks are held (so a concurrent twin is seen), and a leg that would take an
    account below its floor raises ``InsufficientFunds`` and posts nothing.
    """
    amounts = [amount for _, amount in legs]
    if any(not isinstance(amount, int) or isinstance(amount, bool) for amount in amounts):
        raise TypeError("ledger amounts are integers (fen)")
    legs = [(account, amount) for account, amount in legs if amount != 0]
    if sum(amount for _, amount in legs) != 0:
        raise UnbalancedTransaction(f"entries of {key!r} sum to {sum(amounts)}, not 0")
    if not legs:
        raise UnbalancedTransaction(f"{key!r} moves no money")
    _check_trial_flows(kind=kind, kinds_and_amounts=[(account.kind, amount) for account, amount in legs])

    with transaction.atomic():
        existing = Transaction.objects.filter(idempotency_key=key).first()
        if existing is not None:
            return existing, False
        ids = sorted({account.pk for account, _ in legs})
        locked = {a.pk: a for a in LedgerAccount.objects.select_for_update().filter(pk__in=ids).order_by("pk")}
        # Checked again under the locks: a twin that committed while we waited is visible now.
        existing = Transaction.objects.filter(idempotency_key=key).first()
        if existing is not None:
            return existing, False
        delta: dict[int, int] = {}
        for account, amount in legs:
            delta[account.pk] = delta.get(account.pk, 0) + amount
        for pk, change in delta.items():
            account = locked[pk]
            if change < 0 and account.floor is not None and account.balance + change < account.floor:
                raise InsufficientFunds(
                    f"account {pk} has {account.balance} fen; {-change} needed (floor {account.floor})"
                )
        try:
            with transaction.atomic():
                txn = Transaction.objects.create(
                    idempotency_key=key,
                    kind=kind,
                    user=user,
                    description=description[:255],
                    metadata=metadata or {},
                    created_by=created_by,
                )
        except IntegrityError:
            return Transaction.objects.get(idempotency_key=key), False
        Entry.objects.bulk_create(Entry(transaction=txn, account_id=pk, amount=amount) for pk, amount in delta.items())
        for pk, change in delta.items():
            LedgerAccount.objects.filter(pk=pk).update(balance=F("balance") + change)
    return txn, True


def _check_trial_flows(*, kind: str, kinds_and_amounts: list[tuple[str, int]]) -> None:
    """Refuse a posting that would move trial credit anywhere but usage or its pool.

    A refund never touches a trial account, and money taken from a trial account may only land in
    the trial-revenue account (usage) or the trial pool (expiry), so trial credit can never leave
    as cash whatever a caller builds.
    """
    if kind == Transaction.Kind.REFUND and any(k == Kind.TRIAL for k, _ in kinds_and_amounts):
        raise TrialNotWithdrawable("Trial credit cannot be refunded.")
    taken_from_trial = -sum(amount for k, amount in kinds_and_amounts if k == Kind.TRIAL and amount < 0)
    landed_in_outlets = sum(amount for k, amount in kinds_and_amounts if k in TRIAL_OUTLETS and amount > 0)
    if taken_from_trial > landed_in_outlets:
        raise TrialNotWithdrawable("Trial credit can only pay for usage.")


@dataclass(frozen=True)
class Posting:
    """One transaction for ``ledger_insert_many``: legs are ``(account_id, amount)``."""

    key: str
    kind: str
    legs: tuple[tuple[int, int], ...]
    user_id: int | None = None
    description: str = ""
    metadata: dict | None = None


def ledger_insert_many(*, postings: list[Posting], account_kinds: dict[int, str]) -> dict[str, int]:
    """Post many balanced transactions in a constant number of queries (PostgreSQL).

    The set-based twin of ``ledger_post`` for the settlement tick. The CALLER holds the row locks
    of every account involved (taken in id order, as ``ledger_post`` does) and has checked the
    floors under them; the database's CHECK constraint refuses a breach anyway. A key that exists
    already is skipped, as a repeat of ``ledger_post`` is. Returns ``{key: transaction id}`` for the
    postings made now. ``account_kinds`` maps each account id to its kind (for the trial guard).
    """
    for posting in postings:
        if any(not isinstance(amount, int) or amount == 0 for _, amount in posting.legs):
            raise TypeError(f"{posting.key!r}: legs are non-zero integers (fen)")
        if sum(amount for _, amount in posting.legs) != 0:
            raise UnbalancedTransaction(f"entries of {posting.key!r} do not sum to 0")
        _check_trial_flows(
            kind=posting.kind, kinds_and_amounts=[(account_kinds[pk], amount) for pk, amount in posting.legs]
        )
    if not postings:
        return {}
    if connection.vendor != "postgresql":  # the portable path: one ledger_post each (correct, slower)
        accounts = LedgerAccount.objects.in_bulk({pk for p in postings for pk, _ in p.legs})
        users = get_user_model().objects.in_bulk({p.user_id for p in postings if p.user_id})
        made = {}
        for p in postings:
            txn, created = ledger_post(
                key=p.key,
                kind=p.kind,
                legs=[(accounts[pk], amount) for pk, amount in p.legs],
                user=users.get(p.user_id),
                description=p.description,
                metadata=p.metadata,
            )
            if created:
                made[p.key] = txn.pk
        return made

    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO billing_transaction (idempotency_key, kind, description, user_id, metadata, created_at)
            SELECT k, kd, d, u, m::jsonb, %s
              FROM unnest(%s::text[], %s::text[], %s::text[], %s::bigint[], %s::text[]) AS t(k, kd, d, u, m)
            ON CONFLICT (idempotency_key) DO NOTHING
            RETURNING idempotency_key, id
            """,
            [
                now,
                [p.key for p in postings],
                [p.kind for p in postings],
                [p.description[:255] for p in postings],
                bigint_array(p.user_id for p in postings),
                [json.dumps(p.metadata or {}) for p in postings],
            ],
        )
        made = dict(cursor.fetchall())
        tx_ids, account_ids, amounts = [], [], []
        delta: dict[int, int] = {}
        for p in postings:
            txn_id = made.get(p.key)
            if txn_id is None:
                continue
            for pk, amount in p.legs:
                tx_ids.append(txn_id)
                account_ids.append(pk)
                amounts.append(amount)
                delta[pk] = delta.get(pk, 0) + amount
        if not tx_ids:
            return made
        cursor.execute(
            "INSERT INTO billing_entry (transaction_id, account_id, amount) "
            "SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[])",
            [bigint_array(tx_ids), bigint_array(account_ids), bigint_array(amounts)],
        )
        cursor.execute(
            "UPDATE billing_ledgeraccount AS a SET balance = a.balance + d.change "
            "FROM unnest(%s::bigint[], %s::bigint[]) AS d(id, change) WHERE a.id = d.id",
            [bigint_array(delta), bigint_array(delta.values())],
        )
    return made


def spendable_split(*, trial_balance: int, cash_balance: int, amount: int) -> tuple[int, int]:
    """How much of ``amount`` comes from trial credit and from paid money: trial first, never below 0.

    The two parts may sum to less than ``amount`` when the balance does not cover it.
    """
    from_trial = min(amount, max(trial_balance, 0))
    from_cash = min(amount - from_trial, max(cash_balance, 0))
    return from_trial, from_cash


# --- SKUs and meters ------------------------------------------------------------------------------


def sku_upsert(
    *, code: str, name: str, unit: str, price_fen: int, unit_seconds: int, is_storage: bool | None = None
) -> Sku:
    """Create or reprice an SKU. Open meters keep the price they started with.

    ``is_storage=True`` marks storage (a disk per GB-day): it keeps running when money runs out.
    ``None`` leaves the flag as it is (False for a new SKU).
    """
    defaults = {"name": name, "unit": unit, "price_fen": price_fen, "unit_seconds": unit_seconds}
    if is_storage is not None:
        defaults["is_storage"] = is_storage
    sku, _ = Sku.objects.update_or_create(code=code, defaults=defaults)
    return sku


def meter_open(
    *, user, sku: Sku | str, quantity: int, ref: str, description: str = "", at: datetime | None = None
) -> None:
    """Open a meter for ``ref`` unless one is open (starting twice bills once), in one statement: the
    index that allows one open meter per ref makes a second start insert nothing (no savepoint, no
    error to catch). For callers that do not need the meter back; ``meter_start`` returns it."""
    if isinstance(sku, str):
        sku = Sku.objects.get(code=sku)
    if quantity <= 0:
        raise ValueError("a meter measures a positive quantity")
    # Through the ORM: the money path never goes around its guards (core.sql is not for billing).
    Meter.objects.bulk_create(
        [
            Meter(
                user=user,
                sku=sku,
                ref=ref,
                description=description or sku.name,
                quantity=quantity,
                price_fen=sku.price_fen,
                unit_seconds=sku.unit_seconds,
                started_at=at or timezone.now(),
            )
        ],
        ignore_conflicts=True,
    )


def meter_start(
    *, user, sku: Sku | str, quantity: int, ref: str, description: str = "", at: datetime | None = None
) -> Meter:
    """Open a meter for ``ref``, or return the one already open (starting twice bills once)."""
    meter_open(user=user, sku=sku, quantity=quantity, ref=ref, description=description, at=at)
    return Meter.objects.get(ref=ref, stopped_at__isnull=True)


def meter_stop(*, ref: str, at: datetime | None = None) -> Meter | None:
    """Close the open meter of ``ref`` and settle it to the second. Stopping twice is harmless.

    A stop reported late, after a tick already charged the meter past ``at``, gives back what was
    charged for the seconds after ``at`` (``meter_settle_back``): a run always costs exactly its
    price for ``stopped_at - started_at``.
    """
    at = at or timezone.now()
    with transaction.atomic():
        meter = (
            Meter.objects.select_for_update().select_related("user").filter(ref=ref, stopped_at__isnull=True).first()
        )
        if meter is None:
            return None
        meter.stopped_at = max(at, meter.started_at)
        meter.save(update_fields=["stopped_at"])
        if elapsed_seconds(start=meter.started_at, end=meter.stopped_at) < meter.settled_seconds:
            meter_settle_back(meter=meter)
        else:
            meter_settle(meter=meter, until=meter.stopped_at)
    return meter


def meter_settle_back(*, meter: Meter) -> int:
    """A closed meter that was settled past its stop: return what it was charged for those seconds.

    The caller holds the meter's row lock. The give-back returns paid money first, up to what this
    meter took from the paid balance, and the rest as trial credit, so neither kind of money turns
    into the other. One per meter (keyed ``usage:meter:<id>:stop``): a meter stops once. Returns
    the fen given back.
    """
    seconds = elapsed_seconds(start=meter.started_at, end=meter.stopped_at)
    owed = amount_owed(
        price_fen=meter.price_fen, quantity=meter.quantity, unit_seconds=meter.unit_seconds, seconds=seconds
    )
    give_back = meter.charged_fen - owed
    if give_back > 0:
        taken = dict(
            Entry.objects.filter(
                transaction__kind=Transaction.Kind.USAGE,
                transaction__metadata__meter=meter.pk,
                account__kind__in=[Kind.REVENUE, Kind.TRIAL_REVENUE],
            )
            .values_list("account__kind")
            .annotate(total=Sum("amount"))
        )
        to_cash = min(give_back, max(taken.get(Kind.REVENUE, 0), 0))
        to_trial = give_back - to_cash
        trial, cash = account_get(user=meter.user, kind=Kind.TRIAL), account_get(user=meter.user, kind=Kind.CASH)
        trial_revenue, revenue = account_get(kind=Kind.TRIAL_REVENUE), account_get(kind=Kind.REVENUE)
        ledger_post(
            key=f"usage:meter:{meter.pk}:stop",
            kind=Transaction.Kind.USAGE,
            legs=[(revenue, -to_cash), (cash, to_cash), (trial_revenue, -to_trial), (trial, to_trial)],
            user=meter.user,
            description=meter.description,
            metadata={
                **usage_metadata(meter=meter, from_seconds=meter.settled_seconds, to_seconds=seconds),
                "correction": "stopped before the last settlement",
            },
        )
    charged = min(meter.charged_fen, owed)
    Meter.objects.filter(pk=meter.pk).update(settled_seconds=seconds, owed_fen=owed, charged_fen=charged)
    meter.settled_seconds, meter.owed_fen, meter.charged_fen = seconds, owed, charged
    return max(give_back, 0)


def usage_key(*, meter_id: int, charged_before: int) -> str:
    """The idempotency key of the usage posting that moves a meter's charged total on from
    ``charged_before``. A meter's charged total only grows, so each key names one posting; two
    settlements that both believed the meter stood at ``charged_before`` (a tick and a stop, two
    ticks, a retried task) collide on the unique key and only one of them posts. ``meter_settle``
    and the tick (``billing.settlement``) share it."""
    return f"usage:meter:{meter_id}:{charged_before}"


def usage_metadata(*, meter: Meter | dict, from_seconds: int, to_seconds: int) -> dict:
    get = meter.get if isinstance(meter, dict) else lambda name: getattr(meter, name)
    return {
        "meter": get("id"),
        "ref": get("ref"),
        "sku": get("sku_id"),
        "from_seconds": from_seconds,
        "to_seconds": to_seconds,
    }


def meter_settle(*, meter: Meter, until: datetime) -> int:
    """Charge ``meter`` for its use up to ``until``; returns the fen posted now.

    The caller holds the meter's row lock. What is owed is computed from the start, and only the
    difference from what was already charged is posted, keyed by ``usage_key``, so a repeat posts
    nothing. Trial credit pays first, then paid money. When the balance does not cover it, what it
    covers is charged and the rest stays owed on the meter (``charged_fen`` lags ``owed_fen``), to
    be collected at the next settlement after a top-up. The tick (``meters_settle_all``) does the
    same for many meters at once.
    """
    end = min(until, meter.stopped_at or until)
    seconds = max(meter.settled_seconds, elapsed_seconds(start=meter.started_at, end=end))
    owed = amount_owed(
        price_fen=meter.price_fen, quantity=meter.quantity, unit_seconds=meter.unit_seconds, seconds=seconds
    )
    due = owed - meter.charged_fen
    if due <= 0:
        if seconds != meter.settled_seconds or owed != meter.owed_fen:
            Meter.objects.filter(pk=meter.pk).update(settled_seconds=seconds, owed_fen=owed)
            meter.settled_seconds, meter.owed_fen = seconds, owed
        return 0
    trial = account_get(user=meter.user, kind=Kind.TRIAL)
    cash = account_get(user=meter.user, kind=Kind.CASH)
    trial_revenue = account_get(kind=Kind.TRIAL_REVENUE)
    revenue = account_get(kind=Kind.REVENUE)
    # Every account of the posting, locked in id order as ledger_post and the tick do: no deadlocks.
    ids = [trial.pk, cash.pk, trial_revenue.pk, revenue.pk]
    accounts = {a.pk: a for a in LedgerAccount.objects.select_for_update().filter(pk__in=ids).order_by("pk")}
    from_trial, from_cash = spendable_split(
        trial_balance=accounts[trial.pk].balance, cash_balance=accounts[cash.pk].balance, amount=due
    )
    charged = from_trial + from_cash
    if charged:
        txn, created = ledger_post(
            key=usage_key(meter_id=meter.pk, charged_before=meter.charged_fen),
            kind=Transaction.Kind.USAGE,
            legs=[(trial, -from_trial), (trial_revenue, from_trial), (cash, -from_cash), (revenue, from_cash)],
            user=meter.user,
            description=meter.description,
            metadata=usage_metadata(meter=meter, from_seconds=meter.settled_seconds, to_seconds=seconds),
        )
        if not created:  # cannot happen under the meter's lock; if it does, trust the ledger
            charged = sum(e.amount for e in txn.entries.all() if e.amount > 0)
            logger.error("meter %s: posting %s existed already; meter repaired from it", meter.pk, txn.pk)
    Meter.objects.filter(pk=meter.pk).update(
        settled_seconds=seconds, owed_fen=owed, charged_fen=meter.charged_fen + charged
    )
    meter.settled_seconds, meter.owed_fen = seconds, owed
    meter.charged_fen += charged
    if charged < due:
        logger.info("meter %s: %s fen owed beyond the balance", meter.pk, due - charged)
    return charged


# --- Trial credit ---------------------------------------------------------------------------------


class TrialUnavailable(BillingError):
    code = "trial_unavailable"


def trial_claim(*, user) -> Transaction:
    """Grant the one-time trial credit to a verified person, once per account and once per person.

    What "verified" means is identity's setting (``IDENTITY_TRIAL_REQUIRES``: an e-mail address by
    default, a mobile number or a real name in China); every number and identity the account verified
    is recorded in the grant's transaction under a unique key (``identity.services.trial_persons_claim``),
    so a number shared by several accounts, one after another or at once, brings one trial. Keyed by
    user too: a repeat returns the original grant. Refused (``TrialUnavailable``) otherwise.
    """
    amount = int(settings.BILLING_TRIAL_CREDIT_FEN)
    if amount <= 0:
        raise TrialUnavailable(_("No trial credit is offered at the moment."))
    if is_team_account(user):
        raise TrialUnavailable(_("A team gets no trial credit: switch to Personal to claim yours."))
    key = trial_grant_key(user_id=user.pk)
    existing = Transaction.objects.filter(idempotency_key=key).first()
    if existing is not None:
        return existing
    expires_at = None
    if settings.BILLING_TRIAL_CREDIT_TTL_DAYS:
        expires_at = (timezone.now() + timedelta(days=int(settings.BILLING_TRIAL_CREDIT_TTL_DAYS))).isoformat()
    try:
        person_keys = trial_person_keys(user=user)
        with transaction.atomic():
            trial_persons_claim(user=user, keys=person_keys)
            txn, _created = ledger_post(
                key=key,
                kind=Transaction.Kind.TRIAL_GRANT,
                user=user,
                legs=[(account_get(kind=Kind.TRIAL_POOL), -amount), (account_get(user=user, kind=Kind.TRIAL), amount)],
                description="Trial credit",
                metadata={"expires_at": expires_at},
            )
    except TrialRefused as exc:
        raise TrialUnavailable(exc.message) from exc
    return txn


# --- Paying for what runs -------------------------------------------------------------------------


def launch_check(*, user, extra_hourly_fen: int) -> None:
    """Refuse (``InsufficientFunds``) a launch the balance cannot pay for a minimum time.

    The balance must cover everything the user already runs plus the new resource for
    ``BILLING_MIN_RUNWAY_S`` (10 minutes by default), so a launch never starts already out of money.
    """
    runway = runway_get(user=user)
    hourly = runway.burn_fen_per_hour + max(extra_hourly_fen, 0)
    needed = amount_owed(price_fen=hourly, quantity=1, unit_seconds=3600, seconds=settings.BILLING_MIN_RUNWAY_S)
    if runway.balance_fen < needed:
        minutes = settings.BILLING_MIN_RUNWAY_S // 60
        raise InsufficientFunds(
            f"Your balance ¥{runway.balance_fen / 100:.2f} does not cover {minutes} minutes at "
            f"¥{hourly / 100:.2f}/h (¥{needed / 100:.2f} needed). Top up or claim your trial credit."
        )


def trial_expire_due(*, now: datetime | None = None) -> int:
    """Return what is left of every expired trial grant to the trial pool; returns how many expired.

    Runs only when ``BILLING_TRIAL_CREDIT_TTL_DAYS`` is set (each grant records its ``expires_at``).
    Keyed per user (``trial:expiry:<user>``), so a repeat, or two runs at once, expire a grant once;
    the amount is read under the account locks, so a concurrent charge is never taken twice.
    """
    if not settings.BILLING_TRIAL_CREDIT_TTL_DAYS:
        return 0
    now = now or timezone.now()
    expired_users = (
        Transaction.objects.filter(kind=Transaction.Kind.TRIAL_GRANT, metadata__expires_at__isnull=False)
        .annotate(expires=Cast(KT("metadata__expires_at"), DateTimeField()))
        .filter(expires__lte=now)
        .values("user_id")
    )
    candidates = LedgerAccount.objects.filter(
        kind=Kind.TRIAL, balance__gt=0, owner_id__in=expired_users
    ).select_related("owner")
    pool = account_get(kind=Kind.TRIAL_POOL)
    expired = 0
    for trial in candidates:
        with transaction.atomic():
            locked = {
                a.pk: a
                for a in LedgerAccount.objects.select_for_update().filter(pk__in=[pool.pk, trial.pk]).order_by("pk")
            }
            left = locked[trial.pk].balance
            if left <= 0:
                continue
            _, created = ledger_post(
                key=f"trial:expiry:{trial.owner_id}",
                kind=Transaction.Kind.TRIAL_EXPIRY,
                user=trial.owner,
                legs=[(trial, -left), (pool, left)],
                description="Trial credit expired",
                metadata={"expired_at": now.isoformat()},
            )
            expired += int(created)
    return expired


# --- Staff ------------------------------------------------------------------------------------------


def balance_adjust(*, user, amount_fen: int, reason: str, staff_user, key: str | None = None) -> Transaction:
    """A staff correction of ``user``'s paid balance: ``amount_fen`` added (or, if negative, taken).

    A ledger ADJUSTMENT against the platform's adjustments account, with the reason as its
    description and the staff member as ``created_by``: it shows in the staff page and in the
    user's own transaction history. Only paid money is adjusted (never trial credit), and a debit
    never takes the wallet below its floor (``InsufficientFunds``). ``key`` makes a resubmitted
    form post once.
    """
    if not isinstance(amount_fen, int) or isinstance(amount_fen, bool) or amount_fen == 0:
        raise ValueError("an adjustment is a non-zero integer number of fen")
    reason = (reason or "").strip()
    if not reason:
        raise ValueError("an adjustment needs a reason")
    if not getattr(staff_user, "is_staff", False):
        raise PermissionError("only staff adjust balances")
    txn, _ = ledger_post(
        key=f"adjust:{key or uuid.uuid4().hex}",
        kind=Transaction.Kind.ADJUSTMENT,
        user=user,
        legs=[(account_get(kind=Kind.ADJUSTMENTS), -amount_fen), (account_get(user=user, kind=Kind.CASH), amount_fen)],
        description=reason,
        metadata={"reason": reason, "staff": staff_user.email},
        created_by=staff_user,
    )
    logger.info("balance adjusted: user %s %+d fen by %s (%s)", user.pk, amount_fen, staff_user.pk, reason)
    return txn


def credit_grant(*, user, amount_fen: int, key: str, description: str, metadata: dict | None = None) -> bool:
    """The platform credits ``user``'s paid balance with ``amount_fen`` (a service credit: an outage, an
    incident), at most once per ``key``. True when it was posted now, False for a repeat.

    One ADJUSTMENT posting against the platform's adjustments account, as a staff correction is, but
    made by the console itself (no ``created_by``): the user sees it in their history with
    ``description``. Call it inside the transaction that records why, so the credit and its cause
    commit together or not at all.
    """
    if not isinstance(amount_fen, int) or isinstance(amount_fen, bool) or amount_fen <= 0:
        raise ValueError("a credit is a positive integer number of fen")
    _txn, created = ledger_post(
        key=f"credit:{key}",
        kind=Transaction.Kind.ADJUSTMENT,
        user=user,
        legs=[(account_get(kind=Kind.ADJUSTMENTS), -amount_fen), (account_get(user=user, kind=Kind.CASH), amount_fen)],
        description=description[:255],
        metadata=metadata or {},
    )
    return created


# --- Moving paid money between wallets ---------------------------------------------------------------


def money_transfer(
    *, payer, payee, amount_fen: int, key: str, created_by=None, description: str = "", metadata: dict | None = None
) -> tuple[Transaction, bool]:
    """Move ``amount_fen`` of paid money from ``payer``'s wallet to ``payee``'s: one TRANSFER posting.

    Only cash moves (trial credit is never paid out). ``ledger_post`` locks both accounts in id order
    (so two transfers in opposite directions cannot deadlock), checks the payer's floor under the lock
    and posts at most once per ``key``: a short balance raises ``InsufficientFunds`` and moves nothing,
    a repeat of ``key`` returns the first transaction with ``created=False``. Returns
    ``(transaction, created)``.
    """
    if not isinstance(amount_fen, int) or isinstance(amount_fen, bool) or amount_fen <= 0:
        raise ValueError("a transfer moves a positive integer number of fen")
    if payer.pk == payee.pk:
        raise ValueError("a transfer needs two different wallets")
    return ledger_post(
        key=f"transfer:{key}",
        kind=Transaction.Kind.TRANSFER,
        user=payer,
        legs=[
            (account_get(user=payer, kind=Kind.CASH), -amount_fen),
            (account_get(user=payee, kind=Kind.CASH), amount_fen),
        ],
        description=description,
        metadata={"payer": payer.pk, "payee": payee.pk, **(metadata or {})},
        created_by=created_by,
    )


# --- Proving the books balance ---------------------------------------------------------------------


@dataclass(frozen=True)
class LedgerCheck:
    ok: bool
    accounts_checked: int
    transactions_checked: int
    entries_total: int
    problems: list[str]


def ledger_check() -> LedgerCheck:
    """Prove the ledger: every cached balance equals the sum of its entries, every transaction's
    entries sum to zero, all entries together sum to zero, and no account sits below its floor.

    Each proof is one SQL statement, so it sees one consistent snapshot even while postings land.
    """
    problems: list[str] = []
    accounts = LedgerAccount.objects.annotate(total=Coalesce(Sum("entries__amount"), Value(0)))
    for account in accounts.exclude(balance=F("total")).order_by("pk")[:100]:
        problems.append(
            f"account {account.pk} ({account.kind}, owner {account.owner_id}): cached balance {account.balance} "
            f"!= sum of entries {account.total}"
        )
    unbalanced = (
        Transaction.objects.annotate(total=Coalesce(Sum("entries__amount"), Value(0)), legs=Count("entries"))
        .filter(~Q(total=0) | Q(legs=0))
        .order_by("pk")[:100]
    )
    for txn in unbalanced:
        if txn.legs == 0:
            problems.append(f"transaction {txn.pk} ({txn.idempotency_key}) has no entries")
        else:
            problems.append(f"transaction {txn.pk} ({txn.idempotency_key}): entries sum to {txn.total}")
    for account in LedgerAccount.objects.filter(floor__isnull=False, balance__lt=F("floor")).order_by("pk")[:100]:
        problems.append(f"account {account.pk}: balance {account.balance} below its floor {account.floor}")
    entries_total = Entry.objects.aggregate(total=Coalesce(Sum("amount"), Value(0)))["total"]
    if entries_total != 0:
        problems.append(f"all entries sum to {entries_total}, not 0")
    return LedgerCheck(
        ok=not problems,
        accounts_checked=LedgerAccount.objects.count(),
        transactions_checked=Transaction.objects.count(),
        entries_total=entries_total,
        problems=problems,
    )


def ledger_check_record():
    """Run ``ledger_check`` and keep its result (a ``LedgerCheckRun``); a mismatch is logged as an error."""
    started = time.monotonic()
    result = ledger_check()
    run = LedgerCheckRun.objects.create(
        ok=result.ok,
        accounts_checked=result.accounts_checked,
        transactions_checked=result.transactions_checked,
        entries_total=result.entries_total,
        problems=result.problems,
        duration_ms=int((time.monotonic() - started) * 1000),
    )
    if not result.ok:
        logger.error("ledger check %s found %d problems: %s", run.pk, len(result.problems), "; ".join(result.problems))
    return run
