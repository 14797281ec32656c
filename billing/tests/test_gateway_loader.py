"""Gateways are pluggable by dotted path, like Django's e-mail backends."""

import pytest
from django.test import override_settings

from billing.gateways import GatewayError, PaymentGateway, gateway_get
from billing.gateways.simulated import SimulatedGateway
from billing.models import TopUpOrder


class UnreachableGateway(PaymentGateway):
    """A gateway that is down: every checkout fails with a transient error."""

    name = "unreachable"

    def create_checkout(self, *, order, return_url):
        raise GatewayError("connection refused", transient=True)


def test_the_simulated_gateway_is_the_default():
    assert isinstance(gateway_get(), SimulatedGateway)
    assert gateway_get() is gateway_get()


@override_settings(BILLING_PAYMENT_GATEWAY="billing.tests.test_gateway_loader.UnreachableGateway")
def test_the_setting_chooses_the_gateway(alice_client):
    assert isinstance(gateway_get(), UnreachableGateway)
    response = alice_client.post("/billing/top-up/", {"preset": "1000"}, follow=True)
    assert "not reachable" in response.content.decode()
    assert TopUpOrder.objects.get().status == TopUpOrder.Status.FAILED  # no checkout: nothing can pay it


@override_settings(BILLING_PAYMENT_GATEWAY="billing.tests.test_gateway_loader.UnreachableGateway")
def test_webhooks_for_a_gateway_not_in_use_are_refused(client, db):
    response = client.post("/billing/webhooks/simulated/", data=b"{}", content_type="application/json")
    assert response.status_code == 404


@override_settings(BILLING_PAYMENT_GATEWAY="billing.models.TopUpOrder")
def test_a_path_that_is_not_a_gateway_is_refused():
    with pytest.raises(TypeError):
        gateway_get()


def test_the_base_class_states_the_contract():
    base = PaymentGateway()
    for call, kwargs in (
        (base.create_checkout, {"order": None, "return_url": ""}),
        (base.verify_webhook, {"body": b"", "headers": {}}),
        (base.refund, {"order": None, "amount_fen": 1, "key": "k"}),
    ):
        assert call.__doc__
        with pytest.raises(NotImplementedError):
            call(**kwargs)


def test_the_simulated_checkout_is_not_served_for_another_gateway(alice, alice_client):
    from billing.tests.gateway_helpers import pending_order

    order = pending_order(alice)
    with override_settings(BILLING_PAYMENT_GATEWAY="billing.tests.test_gateway_loader.UnreachableGateway"):
        assert alice_client.get(f"/billing/simulated-gateway/{order.pk}/").status_code == 404
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PENDING
