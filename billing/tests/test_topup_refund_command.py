"""Support refunds a top-up from the shell, through the same service."""

import io

import pytest
from django.core.management import CommandError, call_command

from billing.models import TopUpOrder
from billing.selectors import balance_get
from billing.tests.gateway_helpers import paid_order


def test_the_command_refunds_through_the_service(alice):
    order = paid_order(alice, 5000)
    out = io.StringIO()
    call_command("topup_refund", str(order.pk), "20.00", "--reason", "Asked by e-mail", stdout=out)
    assert "¥20.00" in out.getvalue() and "partially_refunded" in out.getvalue()
    call_command("topup_refund", str(order.pk), "20.00", "--reason", "Asked by e-mail", stdout=io.StringIO())
    assert balance_get(user=alice).cash == 3000  # the repeat refunded nothing more
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PARTIALLY_REFUNDED


@pytest.mark.parametrize(("order_id", "amount"), [(None, "80"), (None, "abc"), (999999, "1")])
def test_bad_requests_are_command_errors(alice, order_id, amount):
    order = paid_order(alice, 5000)
    with pytest.raises(CommandError):
        call_command("topup_refund", str(order_id or order.pk), amount, "--reason", "No")
    assert balance_get(user=alice).cash == 5000
