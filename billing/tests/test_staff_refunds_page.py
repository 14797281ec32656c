"""The staff refunds page: reason, partial amounts, the gateway's answer; nobody else sees it."""

from billing.gateways import GatewayError
from billing.gateways.simulated import SimulatedGateway
from billing.models import Refund, TopUpOrder
from billing.selectors import balance_get
from billing.tests.gateway_helpers import paid_order


def test_staff_refund_part_of_a_top_up_and_see_the_gateways_refund_id(alice, staff, client_for):
    order = paid_order(alice, 5000)
    client = client_for(staff)
    page = client.get(f"/staff/billing/refunds/?order={order.pk}").content.decode()
    assert 'value="50.00"' in page and "alice@example.com" in page
    key = "a" * 32
    response = client.post(
        "/staff/billing/refunds/",
        {"order": order.pk, "amount": "12.50", "reason": "Unused hours", "key": key},
        follow=True,
    )
    refund = Refund.objects.get()
    assert (refund.amount_fen, refund.reason, refund.created_by) == (1250, "Unused hours", staff)
    assert refund.gateway_refund_id in response.content.decode()
    # The same form submitted twice refunds once.
    client.post("/staff/billing/refunds/", {"order": order.pk, "amount": "12.50", "reason": "Unused hours", "key": key})
    assert Refund.objects.count() == 1
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PARTIALLY_REFUNDED and balance_get(user=alice).cash == 3750


def test_a_refused_refund_is_a_form_error_that_says_why(alice, staff, client_for, monkeypatch):
    order = paid_order(alice, 5000)

    def refuse(self, **kwargs):
        raise GatewayError("ACQ.TRADE_HAS_CLOSE")

    monkeypatch.setattr(SimulatedGateway, "refund", refuse)
    response = client_for(staff).post(
        "/staff/billing/refunds/", {"order": order.pk, "amount": "50", "reason": "Why not", "key": "b" * 32}
    )
    assert response.status_code == 200 and "ACQ.TRADE_HAS_CLOSE" in response.content.decode()
    too_much = client_for(staff).post(
        "/staff/billing/refunds/", {"order": order.pk, "amount": "60", "reason": "Too much", "key": "c" * 32}
    )
    assert "can still be refunded" in too_much.content.decode()
    missing = client_for(staff).post(
        "/staff/billing/refunds/", {"order": 999999, "amount": "1", "reason": "x", "key": "d" * 32}
    )
    assert "No top-up order" in missing.content.decode()
    assert not Refund.objects.exists() and balance_get(user=alice).cash == 5000


def test_the_page_is_a_404_for_everyone_else(alice, alice_client):
    assert alice_client.get("/staff/billing/refunds/").status_code == 404
    assert alice_client.post("/staff/billing/refunds/", {}).status_code == 404
