import pytest

from billing.models import Transaction
from billing.selectors import balance_get
from billing.services import InsufficientFunds, balance_adjust, ledger_check
from billing.staff_forms import yuan_to_fen
from billing.tests.helpers import topup


def test_staff_credit_a_users_paid_balance_with_a_reason(alice, staff):
    txn = balance_adjust(user=alice, amount_fen=1250, reason="Refund for a failed launch", staff_user=staff)
    assert balance_get(user=alice).cash == 1250
    assert txn.kind == Transaction.Kind.ADJUSTMENT and txn.created_by == staff
    assert txn.description == "Refund for a failed launch"
    assert alice.transactions.filter(pk=txn.pk).exists()  # in the user's own history
    assert ledger_check().ok


def test_a_debit_never_takes_the_wallet_below_zero(alice, staff):
    topup(alice, 500)
    with pytest.raises(InsufficientFunds):
        balance_adjust(user=alice, amount_fen=-501, reason="Chargeback", staff_user=staff)
    balance_adjust(user=alice, amount_fen=-500, reason="Chargeback", staff_user=staff)
    assert balance_get(user=alice).cash == 0


def test_an_adjustment_needs_a_reason_and_a_staff_member(alice, bob, staff):
    with pytest.raises(ValueError):
        balance_adjust(user=alice, amount_fen=100, reason="  ", staff_user=staff)
    with pytest.raises(PermissionError):
        balance_adjust(user=alice, amount_fen=100, reason="gift", staff_user=bob)
    assert balance_get(user=alice).cash == 0


def test_the_same_form_submitted_twice_adjusts_once(alice, staff):
    first = balance_adjust(user=alice, amount_fen=100, reason="x", staff_user=staff, key="k1")
    again = balance_adjust(user=alice, amount_fen=100, reason="x", staff_user=staff, key="k1")
    assert first.pk == again.pk and balance_get(user=alice).cash == 100


@pytest.mark.parametrize(
    ("text", "fen"), [("12.50", 1250), ("-3", -300), ("0.07", 7), ("+1.5", 150), ("¥1,000.01", 100001)]
)
def test_yuan_are_parsed_to_fen_without_float(text, fen):
    assert yuan_to_fen(text) == fen


@pytest.mark.parametrize("text", ["1.234", "abc", "1e3", "", "0.1.2", "nan"])
def test_malformed_amounts_are_refused(text):
    with pytest.raises(ValueError):
        yuan_to_fen(text)
