"""Alipay: page pay and QR checkouts, RSA2 notifications credited once, the sweep, refunds."""

from __future__ import annotations

import logging
from datetime import timedelta
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.test import Client
from django.utils import timezone

from billing.gateways import GatewayError
from billing.models import Refund, TopUpOrder, Transaction
from billing.payments import topup_order_create, topup_orders_expire, topup_refund
from billing.selectors import balance_get
from billing.tests.fake_gateways import rsa_key

FORM = "application/x-www-form-urlencoded"


def notify(body: bytes, gateway: str = "alipay_qr"):
    return Client().post(f"/billing/webhooks/{gateway}/", data=body, content_type=FORM)


def qr_order(alice, amount_fen=5000) -> TopUpOrder:
    order, _url = topup_order_create(user=alice, amount_fen=amount_fen, gateway_name="alipay_qr")
    order.refresh_from_db()
    return order


def test_page_pay_sends_the_payer_to_alipay_with_a_request_signed_rsa2(real_gateways, alice):
    order, url = topup_order_create(
        user=alice,
        amount_fen=5050,
        return_url="https://console.example.com/billing/orders/{order}/",
        gateway_name="alipay",
    )
    assert url.startswith("https://openapi.alipay.com/gateway.do?")
    params = dict(parse_qsl(urlsplit(url).query))
    real_gateways.alipay.check_request_signature(params)  # raises unless signed by the app's key
    assert params["method"] == "alipay.trade.page.pay"
    assert params["notify_url"] == "https://console.example.com/billing/webhooks/alipay/"
    assert params["return_url"] == f"https://console.example.com/billing/orders/{order.pk}/"
    assert '"total_amount":"50.50"' in params["biz_content"]
    assert f'"out_trade_no":"topup_{order.pk}"' in params["biz_content"]


def test_the_qr_checkout_shows_alipays_code_on_the_order_page(real_gateways, alice, alice_client):
    response = alice_client.post("/billing/top-up/", {"preset": "5000", "gateway": "alipay_qr"})
    order = TopUpOrder.objects.get()
    assert response.status_code == 302 and response["Location"].endswith(f"/billing/orders/{order.pk}/")
    assert order.gateway == "alipay_qr" and order.checkout_qr == f"https://qr.alipay.com/bax0topup_{order.pk}"
    page = alice_client.get(f"/billing/orders/{order.pk}/").content.decode()
    assert "<svg" in page and "Scan with your phone" in page


def test_the_top_up_page_offers_every_enabled_gateway(real_gateways, alice_client):
    page = alice_client.get("/billing/").content.decode()
    for name in ("simulated", "alipay", "alipay_qr", "wechatpay", "stripe"):
        assert f'value="{name}"' in page


def test_a_gateway_not_enabled_is_a_form_error(real_gateways, alice_client):
    response = alice_client.post("/billing/top-up/", {"preset": "5000", "gateway": "paypal"})
    assert response.status_code == 400
    assert not TopUpOrder.objects.exists()


def test_a_notification_delivered_ten_times_credits_once(real_gateways, alice):
    order = qr_order(alice)
    real_gateways.alipay.pay(f"topup_{order.pk}")
    body = real_gateways.alipay.notification(out_trade_no=f"topup_{order.pk}", total_amount="50.00")
    for _ in range(10):
        response = notify(body)
        assert response.status_code == 200 and response.content == b"success"  # what Alipay waits for
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PAID
    assert order.gateway_reference == real_gateways.alipay.trades[f"topup_{order.pk}"]["trade_no"]
    assert balance_get(user=alice).cash == 5000
    assert Transaction.objects.filter(kind=Transaction.Kind.TOPUP).count() == 1


def test_notifications_out_of_order_change_nothing_after_the_payment(real_gateways, alice):
    order = qr_order(alice)
    no = f"topup_{order.pk}"
    real_gateways.alipay.pay(no)
    finished = real_gateways.alipay.notification(out_trade_no=no, total_amount="50.00", trade_status="TRADE_FINISHED")
    waiting = real_gateways.alipay.notification(out_trade_no=no, total_amount="50.00", trade_status="WAIT_BUYER_PAY")
    success = real_gateways.alipay.notification(out_trade_no=no, total_amount="50.00")
    closed = real_gateways.alipay.notification(out_trade_no=no, total_amount="50.00", trade_status="TRADE_CLOSED")
    for body in (finished, waiting, success, closed):  # FINISHED before SUCCESS, a stale WAIT, a late CLOSED
        assert notify(body).content == b"success"
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PAID
    assert balance_get(user=alice).cash == 5000


def test_a_payment_after_the_order_expired_still_credits(real_gateways, alice):
    order = qr_order(alice)
    TopUpOrder.objects.filter(pk=order.pk).update(status=TopUpOrder.Status.EXPIRED)
    real_gateways.alipay.pay(f"topup_{order.pk}")
    assert (
        notify(real_gateways.alipay.notification(out_trade_no=f"topup_{order.pk}", total_amount="50.00")).content
        == b"success"
    )
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PAID and balance_get(user=alice).cash == 5000


@pytest.mark.parametrize(
    "change",
    [
        {"signer": rsa_key("someone-else")},  # forged: signed with a key that is not Alipay's
        {"app_id": "2021999999999999"},  # genuine-looking, for another app
    ],
)
def test_forged_and_foreign_notifications_are_refused(real_gateways, alice, change):
    order = qr_order(alice)
    body = real_gateways.alipay.notification(out_trade_no=f"topup_{order.pk}", total_amount="50.00", **change)
    response = notify(body)
    assert response.status_code in (400, 401) and response.content != b"success"
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PENDING and balance_get(user=alice).cash == 0


def test_a_notification_altered_after_signing_is_refused(real_gateways, alice):
    order = qr_order(alice)
    body = real_gateways.alipay.notification(out_trade_no=f"topup_{order.pk}", total_amount="50.00")
    response = notify(body.replace(b"total_amount=50.00", b"total_amount=5000.00"))
    assert response.status_code == 401
    assert balance_get(user=alice).cash == 0


def test_a_signed_notification_for_another_amount_is_refused_and_logged(real_gateways, alice, caplog):
    order = qr_order(alice)
    body = real_gateways.alipay.notification(out_trade_no=f"topup_{order.pk}", total_amount="0.01")
    with caplog.at_level(logging.ERROR, logger="billing.payments"):
        response = notify(body)
    assert response.status_code == 400 and response.json()["error"]["code"] == "amount_mismatch"
    assert any("refused" in record.getMessage() for record in caplog.records)
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PENDING and balance_get(user=alice).cash == 0
    assert not order.events.exists()  # the refused event was not recorded: a correct one still applies


def test_unpaid_orders_are_queried_then_closed_at_alipay(real_gateways, alice):
    order = qr_order(alice)
    TopUpOrder.objects.filter(pk=order.pk).update(created_at=timezone.now() - timedelta(days=2))
    assert topup_orders_expire() == 1
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.EXPIRED
    assert real_gateways.alipay.trades[f"topup_{order.pk}"]["status"] == "TRADE_CLOSED"
    methods = [method for method, _biz in real_gateways.alipay.calls]
    assert methods[-2:] == ["alipay.trade.query", "alipay.trade.close"]
    assert topup_orders_expire() == 0  # nothing pending: the sweep asks no more


def test_a_payment_whose_notification_was_lost_is_found_by_the_sweep(real_gateways, alice):
    order = qr_order(alice)
    real_gateways.alipay.pay(f"topup_{order.pk}")
    TopUpOrder.objects.filter(pk=order.pk).update(created_at=timezone.now() - timedelta(days=2))
    assert topup_orders_expire() == 0
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PAID and balance_get(user=alice).cash == 5000
    # The notification arriving after all is a duplicate in effect: still one credit.
    notify(real_gateways.alipay.notification(out_trade_no=f"topup_{order.pk}", total_amount="50.00"))
    assert Transaction.objects.filter(kind=Transaction.Kind.TOPUP).count() == 1


def test_page_pay_orders_never_opened_at_alipay_expire_too(real_gateways, alice):
    order, _url = topup_order_create(user=alice, amount_fen=5000, gateway_name="alipay")
    TopUpOrder.objects.filter(pk=order.pk).update(created_at=timezone.now() - timedelta(days=2))
    assert topup_orders_expire() == 1  # ACQ.TRADE_NOT_EXIST: the payer never logged in at the cashier


def test_a_refund_is_posted_when_alipay_confirms_it(real_gateways, alice, staff):
    order = qr_order(alice)
    real_gateways.alipay.pay(f"topup_{order.pk}")
    notify(real_gateways.alipay.notification(out_trade_no=f"topup_{order.pk}", total_amount="50.00"))
    refund = topup_refund(order=order, amount_fen=2000, reason="Asked for part back", created_by=staff)
    again = topup_refund(order=order, amount_fen=2000, reason="Asked for part back", created_by=staff)
    assert again.pk == refund.pk
    assert list(real_gateways.alipay.refunds.values()) == [{"amount": "20.00"}]
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PARTIALLY_REFUNDED and order.refunded_fen == 2000
    assert balance_get(user=alice).cash == 3000


def test_a_refund_alipay_refuses_posts_nothing(real_gateways, alice):
    order = qr_order(alice)
    real_gateways.alipay.pay(f"topup_{order.pk}")
    notify(real_gateways.alipay.notification(out_trade_no=f"topup_{order.pk}", total_amount="50.00"))
    real_gateways.alipay.refuse_refunds = True
    with pytest.raises(GatewayError):
        topup_refund(order=order, amount_fen=5000, reason="Refused upstream")
    assert not Refund.objects.exists() and balance_get(user=alice).cash == 5000
