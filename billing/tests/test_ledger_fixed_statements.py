"""The ledger's rows cannot be changed through ``core.sql``.

``core.sql`` writes statements by hand for speed; the ledger's tables are append-only at the ORM
(``core.appendonly``: their queryset refuses ``update``) and in the database (a trigger). A statement
of ``core.sql`` must not be the way around the first guard: it runs only ``SELECT``s, and a write
dressed as one meets the second. (``.importlinter`` keeps billing from importing ``core.sql`` at all.)
"""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from billing.models import AppendOnlyError, Entry, LedgerAccount, Transaction
from billing.services import account_get, ledger_post
from core import sql

pytestmark = pytest.mark.django_db


def _entry(user) -> Entry:
    txn, _ = ledger_post(
        key="topup:fixed-statements",
        kind=Transaction.Kind.TOPUP,
        user=user,
        legs=[
            (account_get(kind=LedgerAccount.Kind.GATEWAY), -500),
            (account_get(user=user, kind=LedgerAccount.Kind.CASH), 500),
        ],
    )
    return txn.entries.get(amount=500)


def test_an_update_of_a_ledger_entry_through_core_sql_is_refused(alice):
    entry = _entry(alice)
    with pytest.raises(ValueError, match="only reads"):
        sql.fetch_one(f"UPDATE {sql.table(Entry)} SET amount = 5000 WHERE id = %s RETURNING id", [entry.pk])  # noqa: S608
    entry.refresh_from_db()
    assert entry.amount == 500


def test_a_write_around_core_sql_is_refused_by_the_database(alice):
    entry = _entry(alice)
    # PostgreSQL runs a data-modifying statement only at the top or in a WITH, both refused above; the
    # trigger is the last guard, whoever writes (here a plain cursor, not core.sql).
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"UPDATE {sql.table(Entry)} SET amount = 5000 WHERE id = %s", [entry.pk])  # noqa: S608
    entry.refresh_from_db()
    assert entry.amount == 500


def test_the_orm_refuses_it_too(alice):
    entry = _entry(alice)
    with pytest.raises(AppendOnlyError):
        Entry.objects.filter(pk=entry.pk).update(amount=5000)
    entry.refresh_from_db()
    assert entry.amount == 500
