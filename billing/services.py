"""Billing's verbs: post to the ledger, open and close meters, settle what a meter owes.

Other apps call these and nothing else: ``sku_upsert``, ``meter_start``, ``meter_stop``. Billing never
imports them back; when a user's money runs out it calls the hook named by the
``BILLING_OUT_OF_FUNDS_HOOK`` setting.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from billing.models import Entry, LedgerAccount, Meter, Sku, Transaction

logger = logging.getLogger(__name__)

Kind = LedgerAccount.Kind


class BillingError(Exception):
    """Base of billing's refusals; ``code`` is machine-readable, the message is for people."""

    code = "billing_error"


class InsufficientFunds(BillingError):
    code = "insufficient_funds"


class UnbalancedTransaction(BillingError):
    code = "unbalanced_transaction"


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


def spendable_split(*, trial_balance: int, cash_balance: int, amount: int) -> tuple[int, int]:
    """How much of ``amount`` comes from trial credit and from paid money: trial first, never below 0.

    The two parts may sum to less than ``amount`` when the balance does not cover it.
    """
    from_trial = min(amount, max(trial_balance, 0))
    from_cash = min(amount - from_trial, max(cash_balance, 0))
    return from_trial, from_cash


# --- SKUs and meters ------------------------------------------------------------------------------


def sku_upsert(*, code: str, name: str, unit: str, price_fen: int, unit_seconds: int) -> Sku:
    """Create or reprice an SKU. Open meters keep the price they started with."""
    sku, _ = Sku.objects.update_or_create(
        code=code, defaults={"name": name, "unit": unit, "price_fen": price_fen, "unit_seconds": unit_seconds}
    )
    return sku


def amount_owed(*, price_fen: int, quantity: int, unit_seconds: int, seconds: int) -> int:
    """``round(price × quantity × seconds / unit_seconds)`` in integers, halves rounded up."""
    numerator = price_fen * quantity * seconds
    return (2 * numerator + unit_seconds) // (2 * unit_seconds)


def meter_start(
    *, user, sku: Sku | str, quantity: int, ref: str, description: str = "", at: datetime | None = None
) -> Meter:
    """Open a meter for ``ref``, or return the one already open (starting twice bills once)."""
    if isinstance(sku, str):
        sku = Sku.objects.get(code=sku)
    if quantity <= 0:
        raise ValueError("a meter measures a positive quantity")
    open_meter = Meter.objects.filter(ref=ref, stopped_at__isnull=True).first()
    if open_meter is not None:
        return open_meter
    try:
        with transaction.atomic():
            return Meter.objects.create(
                user=user,
                sku=sku,
                ref=ref,
                description=description or sku.name,
                quantity=quantity,
                price_fen=sku.price_fen,
                unit_seconds=sku.unit_seconds,
                started_at=at or timezone.now(),
            )
    except IntegrityError:
        return Meter.objects.get(ref=ref, stopped_at__isnull=True)


def meter_stop(*, ref: str, at: datetime | None = None) -> Meter | None:
    """Close the open meter of ``ref`` and settle it to the second. Stopping twice is harmless."""
    at = at or timezone.now()
    with transaction.atomic():
        meter = Meter.objects.select_for_update().filter(ref=ref, stopped_at__isnull=True).first()
        if meter is None:
            return None
        meter.stopped_at = max(at, meter.started_at)
        meter.save(update_fields=["stopped_at"])
        meter_settle(meter=meter, until=meter.stopped_at)
    return meter


def meter_settle(*, meter: Meter, until: datetime) -> int:
    """Charge ``meter`` for its use up to ``until``; returns the fen posted now.

    The caller holds the meter's row lock. What is owed is computed from the start, and only the
    difference from what was already charged is posted, keyed by (meter, seconds), so a repeat posts
    nothing. When the balance does not cover it, what it covers is charged and the rest stays owed
    on the meter (``charged_fen`` lags), to be collected at the next settlement after a top-up.
    """
    end = min(until, meter.stopped_at or until)
    seconds = max(0, int((end - meter.started_at).total_seconds()))
    owed = amount_owed(
        price_fen=meter.price_fen, quantity=meter.quantity, unit_seconds=meter.unit_seconds, seconds=seconds
    )
    due = owed - meter.charged_fen
    if due <= 0:
        if seconds > meter.settled_seconds:
            Meter.objects.filter(pk=meter.pk).update(settled_seconds=seconds)
            meter.settled_seconds = seconds
        return 0
    trial = account_get(user=meter.user, kind=Kind.TRIAL)
    cash = account_get(user=meter.user, kind=Kind.CASH)
    accounts = {
        a.pk: a for a in LedgerAccount.objects.select_for_update().filter(pk__in=[trial.pk, cash.pk]).order_by("pk")
    }
    from_trial, from_cash = spendable_split(
        trial_balance=accounts[trial.pk].balance, cash_balance=accounts[cash.pk].balance, amount=due
    )
    charged = from_trial + from_cash
    if charged:
        legs = [
            (trial, -from_trial),
            (account_get(kind=Kind.TRIAL_REVENUE), from_trial),
            (cash, -from_cash),
            (account_get(kind=Kind.REVENUE), from_cash),
        ]
        ledger_post(
            key=f"usage:meter:{meter.pk}:{meter.charged_fen}:{seconds}",
            kind=Transaction.Kind.USAGE,
            legs=legs,
            user=meter.user,
            description=meter.description,
            metadata={
                "meter": meter.pk,
                "ref": meter.ref,
                "sku": meter.sku_id,
                "from_seconds": meter.settled_seconds,
                "to_seconds": seconds,
            },
        )
    Meter.objects.filter(pk=meter.pk).update(settled_seconds=seconds, charged_fen=F("charged_fen") + charged)
    meter.settled_seconds = seconds
    meter.charged_fen += charged
    if charged < due:
        logger.info("meter %s: %s fen owed beyond the balance", meter.pk, due - charged)
    return charged


# --- Trial credit ---------------------------------------------------------------------------------


class TrialUnavailable(BillingError):
    code = "trial_unavailable"


def trial_claim(*, user) -> Transaction:
    """Grant the one-time trial credit to a user whose e-mail address is verified.

    Keyed by user, so any number of concurrent or repeated claims grant it once; a repeat returns
    the original grant. Refused (``TrialUnavailable``) for an unverified address or when the credit
    is set to zero.
    """
    from allauth.account.models import EmailAddress

    amount = int(settings.BILLING_TRIAL_CREDIT_FEN)
    if amount <= 0:
        raise TrialUnavailable("No trial credit is offered.")
    if not EmailAddress.objects.filter(user=user, verified=True).exists():
        raise TrialUnavailable("Verify your e-mail address to claim the trial credit.")
    expires_at = None
    if settings.BILLING_TRIAL_CREDIT_TTL_DAYS:
        expires_at = (timezone.now() + timedelta(days=int(settings.BILLING_TRIAL_CREDIT_TTL_DAYS))).isoformat()
    txn, _ = ledger_post(
        key=f"trial:grant:{user.pk}",
        kind=Transaction.Kind.TRIAL_GRANT,
        user=user,
        legs=[(account_get(kind=Kind.TRIAL_POOL), -amount), (account_get(user=user, kind=Kind.TRIAL), amount)],
        description="Trial credit",
        metadata={"expires_at": expires_at},
    )
    return txn


def trial_claimed(*, user) -> bool:
    return Transaction.objects.filter(idempotency_key=f"trial:grant:{user.pk}").exists()


# --- Paying for what runs -------------------------------------------------------------------------


def launch_check(*, user, extra_hourly_fen: int) -> None:
    """Refuse (``InsufficientFunds``) a launch the balance cannot pay for a minimum time.

    The balance must cover everything the user already runs plus the new resource for
    ``BILLING_MIN_RUNWAY_S`` (10 minutes by default), so a launch never starts already out of money.
    """
    from billing.selectors import runway_get

    runway = runway_get(user=user)
    hourly = runway.burn_fen_per_hour + max(extra_hourly_fen, 0)
    needed = amount_owed(price_fen=hourly, quantity=1, unit_seconds=3600, seconds=settings.BILLING_MIN_RUNWAY_S)
    if runway.balance_fen < needed:
        minutes = settings.BILLING_MIN_RUNWAY_S // 60
        raise InsufficientFunds(
            f"Your balance ¥{runway.balance_fen / 100:.2f} does not cover {minutes} minutes at "
            f"¥{hourly / 100:.2f}/h (¥{needed / 100:.2f} needed). Top up or claim your trial credit."
        )
