"""The settlement tick: charge every open meter (and every closed one still owing) up to now.

``meters_settle_all`` does for all meters what ``meter_settle`` does for one, with set-based SQL on
PostgreSQL and a constant number of queries per batch, however many meters there are:

1. claim a batch of meters (``FOR UPDATE SKIP LOCKED``, keyset by id) and compute in SQL the
   seconds used so far and ``round(rate × seconds)`` owed;
2. lock the wallets of their owners and the two revenue accounts, in id order (as ``ledger_post``
   and ``meter_settle`` do, so no two writers deadlock);
3. split each meter's due trial-first in Python (what the balance covers; the rest stays owed);
4. post every charge with ``ledger_insert_many`` (one INSERT of transactions, one of entries, one
   UPDATE of cached balances), keyed by ``usage_key`` exactly as ``meter_settle`` keys them;
5. update the meters in one UPDATE … FROM unnest(…).

Why it is safe: a meter is charged only under its row lock, in the same database transaction that
moves its ``charged_fen`` on; the posting's key names the charged total it moves on from, so two
settlements that somehow saw the same state collide on the unique key. Two ticks at once split the
meters between them (SKIP LOCKED); a tick and ``meter_stop`` serialise on the meter row; a worker
killed mid-batch rolls back and the next tick settles from where the meter really is: no double
charge, no gap. A meter skipped because it was locked is settled by whoever holds it, or next tick.
A stop reported after a tick charged past it gives the extra seconds back (``meter_settle_back``).

On other databases (SQLite in development) the tick settles one meter at a time with
``meter_settle``: the same arithmetic and keys, more queries.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q, Sum
from django.utils import timezone

from billing.models import LedgerAccount, Meter, Transaction
from billing.services import (
    Posting,
    account_get,
    ledger_insert_many,
    meter_settle,
    spendable_split,
    usage_key,
    usage_metadata,
)
from core.pgarray import bigint_array

logger = logging.getLogger(__name__)

Kind = LedgerAccount.Kind


@dataclass
class SettleReport:
    """What one tick did."""

    now: datetime
    batches: int = 0
    meters: int = 0  # meters claimed and brought up to ``now``
    postings: int = 0  # usage transactions posted
    charged_fen: int = 0  # money moved from wallets to revenue
    short_fen: int = 0  # due this tick that the balances did not cover (stays owed on the meters)
    users_short: set[int] = field(default_factory=set)


_CLAIM_SQL = """
WITH claimed AS (
    SELECT id, user_id, sku_id, ref, description, price_fen, quantity, unit_seconds,
           settled_seconds, charged_fen, owed_fen,
           GREATEST(
               settled_seconds,
               FLOOR(EXTRACT(EPOCH FROM (LEAST(COALESCE(stopped_at, %(now)s), %(now)s) - started_at)))::bigint
           ) AS seconds
      FROM billing_meter
     WHERE (stopped_at IS NULL OR charged_fen < owed_fen)
       AND id > %(after)s
     ORDER BY id
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
)
SELECT id, user_id, sku_id, ref, description, settled_seconds, charged_fen, owed_fen, seconds,
       (2 * price_fen * quantity * seconds + unit_seconds) / (2 * unit_seconds) AS owed
  FROM claimed
 ORDER BY id
"""

_CLAIM_COLUMNS = (
    "id",
    "user_id",
    "sku_id",
    "ref",
    "description",
    "settled_seconds",
    "charged_fen",
    "owed_fen",
    "seconds",
    "owed",
)

# Only wallets with money are locked (and a wallet emptied meanwhile drops out when the lock is won:
# PostgreSQL re-checks the WHERE). A wallet that was empty is treated as empty even if a top-up lands
# a moment later: the meter stays owing and the next tick collects it. Conservative, and half the
# row locks for the common case of a user with only trial credit or only paid money.
#
# The owners are a set the executor hashes once (``IN (SELECT unnest(…))``: a hashed subplan), not
# ``owner_id = ANY(%s)``. PostgreSQL hashes an ``= ANY(array)`` only when the array is a constant at
# planning time; from the sixth run of a prepared statement (psycopg prepares a statement on its
# second run, DATABASE_PREPARE_THRESHOLD) it may switch to a generic plan, where the array is a
# parameter and each of the table's rows searched the 10,000 owners one by one: the tick for
# 10,000 meters went from 1.1 s to 2.7 s. The subplan is hashed in either plan, and planning it
# does not cost what planning a constant array of 10,000 elements does (about 13 ms).
# test_settlement_plans.py holds both to it. (The casts matter: psycopg sends small ints as
# smallint[], and a bigint compared with a smallint cannot be hashed.)
_LOCK_ACCOUNTS_SQL = """
SELECT id, owner_id, kind, balance
  FROM billing_ledgeraccount
 WHERE (owner_id IN (SELECT unnest(%s::bigint[])) AND kind IN ('trial', 'cash') AND balance > 0)
    OR id = ANY(%s::bigint[])
 ORDER BY id
   FOR UPDATE
"""

_UPDATE_METERS_SQL = """
UPDATE billing_meter AS m
   SET settled_seconds = v.seconds, owed_fen = v.owed, charged_fen = v.charged
  FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[]) AS v(id, seconds, owed, charged)
 WHERE m.id = v.id
"""


def meters_settle_all(*, now: datetime | None = None, batch_size: int | None = None) -> SettleReport:
    """Settle every open meter, and every closed meter still owing, up to ``now``.

    Each batch of ``BILLING_SETTLE_BATCH_SIZE`` meters is one database transaction of six queries
    (plus one to find the revenue accounts, and one more claim when a batch came back full);
    run it as often as you like, from as many workers as you like.
    """
    now = now or timezone.now()
    report = SettleReport(now=now)
    if connection.vendor != "postgresql":
        _settle_one_by_one(now=now, report=report)
        return report
    limit = batch_size or settings.BILLING_SETTLE_BATCH_SIZE
    system = dict(
        LedgerAccount.objects.filter(owner__isnull=True, kind__in=[Kind.TRIAL_REVENUE, Kind.REVENUE]).values_list(
            "kind", "pk"
        )
    )
    if len(system) < 2:  # the first tick ever: create them
        system = {kind: account_get(kind=kind).pk for kind in (Kind.TRIAL_REVENUE, Kind.REVENUE)}
    after = 0
    while True:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(_CLAIM_SQL, {"now": now, "after": after, "limit": limit})
                rows = [dict(zip(_CLAIM_COLUMNS, row, strict=True)) for row in cursor.fetchall()]
            if not rows:
                break
            _settle_batch(rows=rows, system=system, report=report)
        report.batches += 1
        report.meters += len(rows)
        after = rows[-1]["id"]
        if len(rows) < limit:
            break
    if report.short_fen:
        logger.info("settlement: %s fen owed beyond the balance of %s users", report.short_fen, len(report.users_short))
    return report


def _settle_batch(*, rows: list[dict], system: dict[str, int], report: SettleReport) -> None:
    """Charge a claimed, locked batch of meters (see the module docstring)."""
    owing_users = sorted({row["user_id"] for row in rows if row["owed"] > row["charged_fen"]})
    wallets: dict[tuple[int, str], dict] = {}
    kinds: dict[int, str] = {pk: kind for kind, pk in system.items()}
    if owing_users:
        with connection.cursor() as cursor:
            cursor.execute(_LOCK_ACCOUNTS_SQL, [bigint_array(owing_users), bigint_array(system.values())])
            for pk, owner_id, kind, balance in cursor.fetchall():
                kinds[pk] = kind
                if owner_id is not None:
                    wallets[(owner_id, kind)] = {"id": pk, "balance": balance}

    postings: list[Posting] = []
    charges: dict[int, int] = {}  # meter id → fen charged now
    for row in rows:  # in meter id order, so a user's meters draw on the balance deterministically
        due = row["owed"] - row["charged_fen"]
        if due <= 0:
            continue
        trial = wallets.get((row["user_id"], Kind.TRIAL))
        cash = wallets.get((row["user_id"], Kind.CASH))
        from_trial, from_cash = spendable_split(
            trial_balance=trial["balance"] if trial else 0, cash_balance=cash["balance"] if cash else 0, amount=due
        )
        if from_trial + from_cash < due:
            report.short_fen += due - from_trial - from_cash
            report.users_short.add(row["user_id"])
        if not from_trial + from_cash:
            continue
        legs = []
        if from_trial:
            trial["balance"] -= from_trial
            legs += [(trial["id"], -from_trial), (system[Kind.TRIAL_REVENUE], from_trial)]
        if from_cash:
            cash["balance"] -= from_cash
            legs += [(cash["id"], -from_cash), (system[Kind.REVENUE], from_cash)]
        postings.append(
            Posting(
                key=usage_key(meter_id=row["id"], charged_before=row["charged_fen"]),
                kind=Transaction.Kind.USAGE,
                legs=tuple(legs),
                user_id=row["user_id"],
                description=row["description"],
                metadata=usage_metadata(meter=row, from_seconds=row["settled_seconds"], to_seconds=row["seconds"]),
            )
        )
        charges[row["id"]] = from_trial + from_cash

    made = ledger_insert_many(postings=postings, account_kinds=kinds)
    if len(made) < len(postings):
        _repair_from_existing(postings=[p for p in postings if p.key not in made], charges=charges)
    report.postings += len(made)
    report.charged_fen += sum(charges.values())

    changed = [
        row
        for row in rows
        if row["seconds"] != row["settled_seconds"] or row["owed"] != row["owed_fen"] or row["id"] in charges
    ]
    if changed:
        with connection.cursor() as cursor:
            cursor.execute(
                _UPDATE_METERS_SQL,
                [
                    bigint_array(row["id"] for row in changed),
                    bigint_array(row["seconds"] for row in changed),
                    bigint_array(row["owed"] for row in changed),
                    bigint_array(row["charged_fen"] + charges.get(row["id"], 0) for row in changed),
                ],
            )


def _repair_from_existing(*, postings: list[Posting], charges: dict[int, int]) -> None:
    """A key that existed already: that money moved before, so the meter takes the amount the ledger
    holds. Cannot happen while meters are only charged under their row lock; logged if it does."""
    existing = dict(
        Transaction.objects.filter(idempotency_key__in=[p.key for p in postings])
        .annotate(moved=Sum("entries__amount", filter=Q(entries__amount__gt=0)))
        .values_list("idempotency_key", "moved")
    )
    for posting in postings:
        meter_id = posting.metadata["meter"]
        charges[meter_id] = existing.get(posting.key) or 0
        logger.error("meter %s: usage posting %s existed already; meter repaired from it", meter_id, posting.key)


def _settle_one_by_one(*, now: datetime, report: SettleReport) -> None:
    """The portable path: ``meter_settle`` each meter under its own lock (same keys, more queries)."""
    ids = list(
        Meter.objects.filter(Q(stopped_at__isnull=True) | Q(charged_fen__lt=F("owed_fen")))
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    for pk in ids:
        with transaction.atomic():
            meter = Meter.objects.select_for_update().select_related("user").filter(pk=pk).first()
            if meter is None:
                continue
            charged = meter_settle(meter=meter, until=now)
            report.meters += 1
            report.charged_fen += charged
            if charged:
                report.postings += 1
            if meter.owed_fen > meter.charged_fen:
                report.short_fen += meter.owed_fen - meter.charged_fen
                report.users_short.add(meter.user_id)
    report.batches = 1 if ids else 0
