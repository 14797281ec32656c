"""A webhook changes anything only when it is signed with the secret, fresh, well formed and new."""

import time

import pytest
from django.conf import settings

from billing.gateways.base import signature_header
from billing.models import TopUpOrder, Transaction, WebhookEvent
from billing.selectors import balance_get
from billing.tests.gateway_helpers import deliver, event_body, pending_order


@pytest.fixture
def order(alice):
    return pending_order(alice, 5000)


def assert_nothing_changed(user, order):
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PENDING
    assert balance_get(user=user).cash == 0
    assert not Transaction.objects.filter(kind=Transaction.Kind.TOPUP).exists()
    assert not WebhookEvent.objects.exists()


def test_a_good_signature_credits_the_wallet(alice, order):
    response = deliver(event_body(order))
    assert response.status_code == 200
    assert response.json()["result"] == "credited"
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PAID
    assert order.paid_at is not None
    assert balance_get(user=alice).cash == 5000


def test_a_wrong_secret_is_refused(alice, order):
    response = deliver(event_body(order), secret="not-the-secret")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "signature_invalid"
    assert_nothing_changed(alice, order)


def test_a_tampered_body_is_refused(alice, order):
    body = event_body(order)
    header = signature_header(body=body, secret=settings.BILLING_GATEWAY_WEBHOOK_SECRET.encode())
    tampered = body.replace(b'"amount_fen": 5000', b'"amount_fen": 9000')
    response = deliver(tampered, header=header)
    assert response.status_code == 401
    assert_nothing_changed(alice, order)


def test_an_unsigned_webhook_is_refused(alice, order):
    response = deliver(event_body(order), header="")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "signature_missing"
    assert_nothing_changed(alice, order)


@pytest.mark.parametrize("header", ["garbage", "t=abc,v1=00", "t=1700000000", "v1=abcdef"])
def test_a_malformed_signature_header_is_refused(alice, order, header):
    response = deliver(event_body(order), header=header)
    assert 400 <= response.status_code < 500
    assert "error" in response.json()
    assert_nothing_changed(alice, order)


@pytest.mark.parametrize("age", [310, -310, 3600])  # the tolerance is 300 s
def test_a_stale_or_future_timestamp_is_refused(alice, order, age):
    response = deliver(event_body(order), timestamp=int(time.time()) - age)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "signature_stale"
    assert_nothing_changed(alice, order)


def test_a_signed_body_that_is_not_json_is_refused(alice, order):
    response = deliver(b"{not json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "malformed"
    assert_nothing_changed(alice, order)


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b'{"id": "evt_1", "type": "payment.succeeded"}',
        b'{"id": "", "type": "payment.succeeded", "data": {"order": 1, "amount_fen": 5000}}',
        b'{"id": "evt_1", "type": "payment.succeeded", "data": {"order": "1", "amount_fen": 5000}}',
        b'{"id": "evt_1", "type": "payment.succeeded", "data": {"order": 1, "amount_fen": 50.0}}',
        b'{"id": "evt_1", "type": "charge.dispute", "data": {"order": 1, "amount_fen": 5000}}',
    ],
)
def test_a_signed_body_of_the_wrong_shape_is_refused(alice, order, body):
    response = deliver(body.replace(b'"order": 1', f'"order": {order.pk}'.encode()))
    assert response.status_code == 400
    assert_nothing_changed(alice, order)


def test_an_amount_that_differs_from_the_order_is_refused(alice, order):
    response = deliver(event_body(order, amount_fen=500000))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "amount_mismatch"
    assert_nothing_changed(alice, order)


def test_an_unknown_order_is_refused(alice, order):
    body = event_body(order).replace(f'"order": {order.pk}'.encode(), b'"order": 999999')
    response = deliver(body)
    assert response.status_code == 404
    assert_nothing_changed(alice, order)


def test_an_unknown_gateway_is_refused(client, alice, order):
    response = client.post("/billing/webhooks/stripe/", data=event_body(order), content_type="application/json")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "unknown_gateway"
    assert_nothing_changed(alice, order)


def test_get_is_not_allowed(client, db):
    assert client.get("/billing/webhooks/simulated/").status_code == 405


def test_a_replayed_event_changes_nothing_more(alice, order):
    body = event_body(order, event_id="evt_replay")
    assert deliver(body).json()["result"] == "credited"
    replay = deliver(body)
    assert replay.status_code == 200
    assert replay.json()["result"] == "duplicate"
    assert balance_get(user=alice).cash == 5000
    assert WebhookEvent.objects.count() == 1


def test_an_event_id_reused_with_another_body_is_a_conflict(alice, order):
    assert deliver(event_body(order, event_id="evt_same")).status_code == 200
    response = deliver(event_body(order, event_id="evt_same", approve=False))
    assert response.status_code == 409
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PAID
    assert balance_get(user=alice).cash == 5000
