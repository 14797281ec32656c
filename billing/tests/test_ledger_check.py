import pytest
from django.core.management import call_command
from django.db import connection

from billing.models import LedgerAccount, LedgerCheckRun
from billing.services import ledger_check, ledger_check_record, trial_claim
from billing.tasks import ledger_check_task
from billing.tests.helpers import topup


def _corrupt_a_cached_balance(user) -> None:
    # What a bug or a hand-edit would do: a cached balance that no longer matches its entries.
    LedgerAccount.objects.filter(owner=user, kind="cash").update(balance=12345)


def test_a_healthy_ledger_passes(alice):
    trial_claim(user=alice)
    topup(alice, 5000)
    result = ledger_check()
    assert result.ok and result.problems == [] and result.entries_total == 0
    assert result.accounts_checked == 4 and result.transactions_checked == 2


def test_a_cached_balance_that_disagrees_with_its_entries_is_reported(alice, caplog):
    topup(alice, 5000)
    _corrupt_a_cached_balance(alice)
    result = ledger_check()
    assert not result.ok
    assert any("cached balance 12345 != sum of entries 5000" in p for p in result.problems)
    run = ledger_check_record()
    assert not run.ok and run.problems == result.problems
    assert "ledger check" in caplog.text and "ERROR" in caplog.text


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the append-only trigger is PostgreSQL's")
def test_an_unbalanced_transaction_is_reported(alice):
    txn = topup(alice, 5000)
    with connection.cursor() as cursor:  # forge history the services could never write
        cursor.execute("SET LOCAL session_replication_role = replica")  # the append-only trigger sleeps
        cursor.execute("UPDATE billing_entry SET amount = 4000 WHERE transaction_id = %s AND amount > 0", [txn.pk])
        cursor.execute("SET LOCAL session_replication_role = DEFAULT")
    problems = ledger_check().problems
    assert any(f"transaction {txn.pk}" in p and "sum to -1000" in p for p in problems)
    assert any("all entries sum to -1000" in p for p in problems)


def test_the_command_exits_1_with_a_report_on_mismatch(alice, capsys):
    topup(alice, 5000)
    call_command("ledger_check")
    assert "ledger OK" in capsys.readouterr().out
    _corrupt_a_cached_balance(alice)
    with pytest.raises(SystemExit) as exit_:
        call_command("ledger_check", "--record")
    assert exit_.value.code == 1
    assert "MISMATCH" in capsys.readouterr().err
    assert LedgerCheckRun.objects.get().ok is False


def test_the_periodic_task_stores_each_result(alice):
    topup(alice, 100)
    assert ledger_check_task.delay().get() is True
    assert ledger_check_task.delay().get() is True
    assert LedgerCheckRun.objects.filter(ok=True).count() == 2
