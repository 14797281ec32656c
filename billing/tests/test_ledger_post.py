import threading

import pytest
from django.db import connection

from billing.models import AppendOnlyError, Entry, LedgerAccount, Transaction
from billing.selectors import balance_get
from billing.services import InsufficientFunds, UnbalancedTransaction, account_get, ledger_post

Kind = LedgerAccount.Kind


def _topup(user, amount, key):
    return ledger_post(
        key=key,
        kind=Transaction.Kind.TOPUP,
        user=user,
        legs=[(account_get(kind=Kind.GATEWAY), -amount), (account_get(user=user, kind=Kind.CASH), amount)],
    )


def test_a_posting_moves_money_between_accounts(alice):
    txn, created = _topup(alice, 5000, "t1")
    assert created
    assert balance_get(user=alice).cash == 5000
    assert sum(e.amount for e in txn.entries.all()) == 0


def test_a_repeated_key_posts_once(alice):
    first, _ = _topup(alice, 5000, "same")
    second, created = _topup(alice, 5000, "same")
    assert not created and second.pk == first.pk
    assert balance_get(user=alice).cash == 5000


def test_unbalanced_postings_are_refused(alice):
    with pytest.raises(UnbalancedTransaction):
        ledger_post(key="bad", kind="topup", legs=[(account_get(user=alice, kind=Kind.CASH), 100)])
    assert not Transaction.objects.exists()


def test_a_wallet_never_goes_below_its_floor(alice):
    _topup(alice, 100, "t")
    with pytest.raises(InsufficientFunds):
        ledger_post(
            key="spend",
            kind="usage",
            legs=[(account_get(user=alice, kind=Kind.CASH), -101), (account_get(kind=Kind.REVENUE), 101)],
        )
    assert balance_get(user=alice).cash == 100


def test_ledger_rows_cannot_be_edited_or_deleted(alice):
    txn, _ = _topup(alice, 100, "t")
    with pytest.raises(AppendOnlyError):
        txn.save()
    with pytest.raises(AppendOnlyError):
        Entry.objects.filter(transaction=txn).update(amount=5)
    with pytest.raises(AppendOnlyError):
        Transaction.objects.all().delete()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the trigger is PostgreSQL's")
def test_the_database_refuses_edits_too(alice):
    from django.db import DatabaseError

    txn, _ = _topup(alice, 100, "t")
    with pytest.raises(DatabaseError, match="append-only"), connection.cursor() as cursor:
        cursor.execute("UPDATE billing_entry SET amount = 1 WHERE transaction_id = %s", [txn.pk])


@pytest.mark.django_db(transaction=True)
def test_concurrent_spends_never_overdraw(alice):
    _topup(alice, 1000, "seed")
    cash, revenue = account_get(user=alice, kind=Kind.CASH), account_get(kind=Kind.REVENUE)
    results: list[str] = []

    def spend(i: int) -> None:
        try:
            ledger_post(key=f"spend-{i}", kind="usage", legs=[(cash, -300), (revenue, 300)])
            results.append("ok")
        except InsufficientFunds:
            results.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=spend, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count("ok") == 3
    assert balance_get(user=alice).cash == 100
