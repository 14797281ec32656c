"""Refunds send back paid money still in the wallet, never trial credit, and once per request."""

import pytest

from billing.gateways.simulated import SimulatedGateway
from billing.models import Entry, Refund, TopUpOrder, Transaction
from billing.payments import RefundRefused, topup_refund
from billing.selectors import balance_get
from billing.services import account_get, ledger_post, trial_claim
from billing.tests.gateway_helpers import paid_order, pending_order
from core.testing import race


def spend(user, fen):
    """Spend ``fen`` of paid money as usage would."""
    ledger_post(
        key=f"test-spend:{user.pk}:{fen}",
        kind=Transaction.Kind.USAGE,
        user=user,
        legs=[(account_get(user=user, kind="cash"), -fen), (account_get(kind="revenue"), fen)],
    )


def test_a_full_refund_moves_cash_back_to_the_gateway(alice):
    order = paid_order(alice, 5000)
    refund = topup_refund(order=order, amount_fen=5000, reason="Customer request")
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.REFUNDED
    assert order.refunded_fen == 5000
    assert balance_get(user=alice).cash == 0
    assert refund.transaction.kind == Transaction.Kind.REFUND
    assert refund.gateway_refund_id.startswith("sim_re_")
    assert sum(Entry.objects.values_list("amount", flat=True)) == 0


def test_a_partial_refund_leaves_the_rest(alice):
    order = paid_order(alice, 5000)
    topup_refund(order=order, amount_fen=2000, reason="Partial")
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PARTIALLY_REFUNDED
    assert order.refundable_fen == 3000
    topup_refund(order=order, amount_fen=3000, reason="The rest")
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.REFUNDED


def test_asking_twice_refunds_once(alice):
    order = paid_order(alice, 5000)
    first = topup_refund(order=order, amount_fen=1000, reason="Duplicate charge")
    again = topup_refund(order=order, amount_fen=1000, reason="Duplicate charge")
    assert again.pk == first.pk
    assert balance_get(user=alice).cash == 4000
    assert Refund.objects.count() == 1


def test_trial_credit_is_never_refunded(alice):
    trial_claim(user=alice)
    order = paid_order(alice, 5000)
    spend(alice, 4000)  # paid money left: 10 yuan; trial credit: 10 yuan
    with pytest.raises(RefundRefused):
        topup_refund(order=order, amount_fen=2000, reason="Trying to cash out trial credit")
    assert balance_get(user=alice) == balance_get(user=alice).__class__(cash=1000, trial=1000)
    topup_refund(order=order, amount_fen=1000, reason="What is left of the paid money")
    balance = balance_get(user=alice)
    assert (balance.cash, balance.trial) == (0, 1000)


def test_a_refund_cannot_exceed_the_order(alice):
    order = paid_order(alice, 5000)
    paid_order(alice, 5000)
    with pytest.raises(RefundRefused):
        topup_refund(order=order, amount_fen=5001, reason="Too much")
    assert balance_get(user=alice).cash == 10000


def test_unpaid_orders_and_bad_amounts_are_refused(alice):
    order = pending_order(alice, 5000)
    with pytest.raises(RefundRefused):
        topup_refund(order=order, amount_fen=100, reason="Not paid")
    paid = paid_order(alice, 5000)
    for amount in (0, -5, 1.5):
        with pytest.raises(RefundRefused):
            topup_refund(order=paid, amount_fen=amount, reason="Bad amount")
    with pytest.raises(RefundRefused):
        topup_refund(order=paid, amount_fen=100, reason="  ")
    assert not Refund.objects.exists()


def test_a_gateway_that_refuses_posts_nothing(alice, monkeypatch):
    from billing.gateways import GatewayError

    order = paid_order(alice, 5000)

    def refuse(self, **kwargs):
        raise GatewayError("card expired")

    monkeypatch.setattr(SimulatedGateway, "refund", refuse)
    with pytest.raises(GatewayError):
        topup_refund(order=order, amount_fen=5000, reason="Gateway says no")
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PAID
    assert balance_get(user=alice).cash == 5000
    assert not Transaction.objects.filter(kind=Transaction.Kind.REFUND).exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_refunds_never_take_more_than_the_paid_balance(alice):

    order = paid_order(alice, 5000)
    done, refused, errors = race(
        lambda i: topup_refund(order=order, amount_fen=2000, reason="Race", key=f"race-{i}"),
        threads=6,
        refusals=(RefundRefused,),
        timeout=30,
    )
    assert errors == []
    results = ["ok"] * len(done) + ["refused"] * len(refused)
    assert sorted(results) == ["ok", "ok"] + ["refused"] * 4
    order.refresh_from_db()
    assert order.refunded_fen == 4000 and order.status == TopUpOrder.Status.PARTIALLY_REFUNDED
    assert balance_get(user=alice).cash == 1000
