"""Shared test helpers: top up a wallet as the gateway would, make SKUs, read the ledger's sums."""

from __future__ import annotations

import itertools

from django.db.models import Sum

from billing.models import Entry, LedgerAccount, Transaction
from billing.services import account_get, ledger_post, sku_upsert

Kind = LedgerAccount.Kind
_keys = itertools.count()


def topup(user, amount: int, key: str | None = None) -> Transaction:
    txn, _ = ledger_post(
        key=key or f"test-topup:{next(_keys)}",
        kind=Transaction.Kind.TOPUP,
        user=user,
        legs=[(account_get(kind=Kind.GATEWAY), -amount), (account_get(user=user, kind=Kind.CASH), amount)],
    )
    return txn


def gpu_sku(price_fen: int = 190):
    return sku_upsert(
        code=f"gpu.{price_fen}", name="A800 80GB", unit="card-hour", price_fen=price_fen, unit_seconds=3600
    )


def disk_sku():
    return sku_upsert(code="disk.gb", name="Disk", unit="GB-day", price_fen=2, unit_seconds=86400, is_storage=True)


def usage_charged(meter) -> int:
    """What the ledger took for ``meter``: the sum of its usage postings' revenue legs."""
    return (
        Entry.objects.filter(
            transaction__kind=Transaction.Kind.USAGE,
            transaction__metadata__meter=meter.pk,
            account__kind__in=[Kind.REVENUE, Kind.TRIAL_REVENUE],
        ).aggregate(total=Sum("amount"))["total"]
        or 0
    )
