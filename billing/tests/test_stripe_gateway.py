"""Stripe Checkout: the session, webhooks verified by the stripe library, credited once; the sweep; refunds."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from billing.gateways import GatewayError
from billing.models import Refund, TopUpOrder, Transaction
from billing.payments import refunds_confirm, topup_order_create, topup_orders_expire, topup_refund
from billing.selectors import balance_get


def deliver(delivery):
    body, headers = delivery
    return Client().post("/billing/webhooks/stripe/", data=body, content_type="application/json", headers=headers)


@pytest.fixture
def checkout(real_gateways, alice):
    order, url = topup_order_create(
        user=alice,
        amount_fen=5000,
        return_url="https://console.example.com/billing/orders/{order}/",
        gateway_name="stripe",
    )
    order.refresh_from_db()
    return order, url, real_gateways.stripe.sessions[order.gateway_reference]


def test_the_checkout_session_is_made_once_for_the_order(checkout, real_gateways):
    order, url, session = checkout
    assert url == session["url"] and url.startswith("https://checkout.stripe.com/")
    assert session["client_reference_id"] == str(order.pk)
    assert (session["amount_total"], session["currency"]) == (5000, "cny")
    assert session["success_url"] == f"https://console.example.com/billing/orders/{order.pk}/"
    assert 30 * 60 <= session["expires_at"] - time.time() <= 24 * 3600


def test_a_completed_session_delivered_ten_times_credits_once(checkout, real_gateways, alice):
    order, _url, session = checkout
    delivery = real_gateways.stripe.event("checkout.session.completed", real_gateways.stripe.pay(session["id"]))
    for _ in range(10):
        assert deliver(delivery).status_code == 200
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PAID and order.gateway_reference == session["payment_intent"]
    assert balance_get(user=alice).cash == 5000
    assert Transaction.objects.filter(kind=Transaction.Kind.TOPUP).count() == 1


def test_a_delayed_payment_credits_only_when_it_succeeds(checkout, real_gateways, alice):
    order, _url, session = checkout
    assert deliver(real_gateways.stripe.event("checkout.session.completed", session)).status_code == 200  # unpaid yet
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PENDING
    paid = real_gateways.stripe.pay(session["id"])
    deliver(real_gateways.stripe.event("checkout.session.async_payment_succeeded", paid))
    deliver(real_gateways.stripe.event("checkout.session.expired", paid))  # out of order: harmless now
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PAID and balance_get(user=alice).cash == 5000


def test_an_expired_session_fails_the_order_and_a_late_payment_still_credits(checkout, real_gateways, alice):
    order, _url, session = checkout
    deliver(real_gateways.stripe.event("checkout.session.expired", session))
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.FAILED
    deliver(real_gateways.stripe.event("checkout.session.completed", real_gateways.stripe.pay(session["id"])))
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PAID and balance_get(user=alice).cash == 5000


@pytest.mark.parametrize("forge", ["wrong_secret", "stale", "tampered", "unsigned"])
def test_forged_replayed_and_tampered_webhooks_are_refused(checkout, real_gateways, alice, forge):
    _order, _url, session = checkout
    paid = real_gateways.stripe.pay(session["id"])
    if forge == "wrong_secret":
        delivery = real_gateways.stripe.event("checkout.session.completed", paid, secret="whsec_not_ours")
    elif forge == "stale":
        delivery = real_gateways.stripe.event("checkout.session.completed", paid, timestamp=int(time.time()) - 3600)
    elif forge == "tampered":
        body, headers = real_gateways.stripe.event("checkout.session.completed", paid)
        delivery = (body.replace(b'"amount_total": 5000', b'"amount_total": 9000'), headers)
    else:
        delivery = (real_gateways.stripe.event("checkout.session.completed", paid)[0], {})
    assert deliver(delivery).status_code == 401
    assert balance_get(user=alice).cash == 0


def test_a_genuine_event_for_another_amount_is_refused(checkout, real_gateways, alice):
    _order, _url, session = checkout
    paid = {**real_gateways.stripe.pay(session["id"]), "amount_total": 1}
    response = deliver(real_gateways.stripe.event("checkout.session.completed", paid))
    assert response.status_code == 400 and response.json()["error"]["code"] == "amount_mismatch"
    assert balance_get(user=alice).cash == 0


def test_events_the_console_does_not_use_are_acknowledged(real_gateways, db):
    response = deliver(real_gateways.stripe.event("customer.created", {"id": "cus_1", "object": "customer"}))
    assert response.status_code == 200  # Stripe would retry anything else for three days


def test_unpaid_sessions_are_queried_then_expired(checkout, real_gateways):
    order, _url, session = checkout
    TopUpOrder.objects.filter(pk=order.pk).update(created_at=timezone.now() - timedelta(days=2))
    assert topup_orders_expire() == 1
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.EXPIRED and session["status"] == "expired"


def test_a_refund_is_posted_once_when_stripe_confirms_it(checkout, real_gateways, alice):
    order, _url, session = checkout
    deliver(real_gateways.stripe.event("checkout.session.completed", real_gateways.stripe.pay(session["id"])))
    order.refresh_from_db()
    first = topup_refund(order=order, amount_fen=1500, reason="Partial refund", key="ticket-1")
    assert topup_refund(order=order, amount_fen=1500, reason="Partial refund", key="ticket-1").pk == first.pk
    (refund,) = real_gateways.stripe.refunds.values()
    assert (refund["payment_intent"], refund["amount"], first.gateway_refund_id) == (
        session["payment_intent"],
        1500,
        refund["id"],
    )
    assert balance_get(user=alice).cash == 3500


def test_a_refund_stripe_refuses_posts_nothing(checkout, real_gateways, alice, monkeypatch):
    order, _url, session = checkout
    deliver(real_gateways.stripe.event("checkout.session.completed", real_gateways.stripe.pay(session["id"])))
    order.refresh_from_db()
    monkeypatch.setattr(
        real_gateways.stripe,
        "_route",
        lambda method, path, form: (400, {"error": {"type": "invalid_request_error", "message": "charge_disputed"}}),
    )
    with pytest.raises(GatewayError):
        topup_refund(order=order, amount_fen=5000, reason="Disputed")
    assert not Refund.objects.exists() and balance_get(user=alice).cash == 5000


def test_the_api_creates_an_order_with_the_chosen_gateway(real_gateways, alice_client):
    response = alice_client.post(
        "/api/v1/billing/orders/", {"amount": "50", "gateway": "wechatpay"}, content_type="application/json"
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["gateway"] == "wechatpay" and body["checkout_qr"].startswith("weixin://")
    bad = alice_client.post(
        "/api/v1/billing/orders/", {"amount": "50", "gateway": "paypal"}, content_type="application/json"
    )
    assert bad.status_code == 400 and "gateway" in bad.json()["error"]["fields"]


def test_a_pending_stripe_refund_is_confirmed_later(checkout, real_gateways, alice):
    order, _url, session = checkout
    deliver(real_gateways.stripe.event("checkout.session.completed", real_gateways.stripe.pay(session["id"])))
    order.refresh_from_db()
    real_gateways.stripe.refund_status = "pending"
    refund = topup_refund(order=order, amount_fen=5000, reason="All of it")
    assert refund.status == Refund.Status.PENDING and refunds_confirm()["pending"] == 1
    real_gateways.stripe.refunds[refund.gateway_refund_id]["status"] = "succeeded"
    assert refunds_confirm()["succeeded"] == 1
    refund.refresh_from_db()
    assert refund.status == Refund.Status.SUCCEEDED and balance_get(user=alice).cash == 0
