"""IDENTITY_REAL_NAME_REQUIRED: off, top-ups are open; on, a person without a verified real name is refused."""

from __future__ import annotations

import pytest

from billing.models import TopUpOrder
from billing.payments import topup_order_create
from identity.errors import RealNameRequired
from identity.services import real_name_verify_individual

pytestmark = pytest.mark.django_db
ID = "440308199003071235"


def test_off_by_default_a_top_up_needs_no_real_name(alice, settings):
    assert settings.IDENTITY_REAL_NAME_REQUIRED is False
    order, _url = topup_order_create(user=alice, amount_fen=1000)
    assert order.status == TopUpOrder.Status.PENDING


def test_on_a_top_up_is_refused_until_the_payer_is_verified(alice, settings):
    settings.IDENTITY_REAL_NAME_REQUIRED = True
    with pytest.raises(RealNameRequired):
        topup_order_create(user=alice, amount_fen=1000)
    assert not TopUpOrder.objects.exists()
    real_name_verify_individual(user=alice, name="张小三", id_number=ID)
    order, _url = topup_order_create(user=alice, amount_fen=1000)
    assert order.status == TopUpOrder.Status.PENDING


def test_on_the_top_up_page_says_why(alice_client, settings):
    settings.IDENTITY_REAL_NAME_REQUIRED = True
    response = alice_client.post("/billing/top-up/", {"preset": 1000})
    assert response.status_code == 403
    assert "Verify your real name" in response.content.decode()


def test_on_the_api_answers_403_real_name_required(alice_client, settings):
    settings.IDENTITY_REAL_NAME_REQUIRED = True
    response = alice_client.post("/api/v1/billing/orders/", {"amount": "10"}, content_type="application/json")
    assert response.status_code == 403, response.content
    assert response.json()["error"]["code"] == "real_name_required"
