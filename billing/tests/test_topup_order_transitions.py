"""Top-up orders move only along their table; a move another worker made first returns False."""

from datetime import timedelta

import pytest

from billing.models import TopUpOrder
from billing.payments import InvalidTransition, topup_order_transition, topup_orders_expire
from billing.selectors import balance_get
from billing.tests.gateway_helpers import deliver, event_body, pending_order

Status = TopUpOrder.Status


def test_every_status_has_a_row_in_the_table():
    assert set(TopUpOrder.TRANSITIONS) == set(Status)


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        (Status.PAID, Status.PENDING),
        (Status.PAID, Status.FAILED),
        (Status.REFUNDED, Status.PENDING),  # (REFUNDED → PAID is allowed: a refund the gateway fails is reversed)
        (Status.PENDING, Status.REFUNDED),
    ],
)
def test_moves_outside_the_table_are_refused(alice, src, dst):
    order = pending_order(alice)
    with pytest.raises(InvalidTransition):
        topup_order_transition(order_id=order.pk, src=src, dst=dst)


def test_a_move_someone_else_made_first_returns_false(alice):
    order = pending_order(alice)
    assert topup_order_transition(order_id=order.pk, src=Status.PENDING, dst=Status.FAILED) is True
    assert topup_order_transition(order_id=order.pk, src=Status.PENDING, dst=Status.FAILED) is False


def test_old_pending_orders_expire_and_a_late_payment_still_credits(alice):
    order = pending_order(alice, 2000)
    TopUpOrder.objects.filter(pk=order.pk).update(created_at=order.created_at - timedelta(days=2))
    fresh = pending_order(alice, 3000)
    assert topup_orders_expire() == 1
    order.refresh_from_db()
    fresh.refresh_from_db()
    assert (order.status, fresh.status) == (Status.EXPIRED, Status.PENDING)
    assert deliver(event_body(order, event_id="evt_late")).json()["result"] == "credited"
    order.refresh_from_db()
    assert order.status == Status.PAID
    assert balance_get(user=alice).cash == 2000
