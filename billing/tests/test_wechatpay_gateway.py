"""WeChat Pay v3 Native: the QR order, notifications verified by the platform certificate and
decrypted with AES-256-GCM, credited once; the sweep; refunds."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from billing.gateways import GatewayError
from billing.models import Refund, TopUpOrder, Transaction
from billing.models import Transaction as Txn
from billing.payments import refunds_confirm, topup_order_create, topup_orders_expire, topup_refund
from billing.selectors import balance_get
from billing.tests.fake_gateways import rsa_key


def notify(body: bytes, headers: dict):
    return Client().post("/billing/webhooks/wechatpay/", data=body, content_type="application/json", headers=headers)


@pytest.fixture
def order(real_gateways, alice) -> TopUpOrder:
    order, _url = topup_order_create(user=alice, amount_fen=5000, gateway_name="wechatpay")
    order.refresh_from_db()
    return order


def paid_notification(real_gateways, order, **changes):
    no = f"topup_{order.pk}"
    real_gateways.wechat.pay(no)
    return real_gateways.wechat.notification(real_gateways.wechat.transaction(no, **changes))


def test_the_native_order_is_signed_by_the_merchant_and_its_code_shown(real_gateways, order, alice_client):
    method, path, body = real_gateways.wechat.calls[0]  # the fake checked the Authorization signature
    assert (method, path) == ("POST", "/v3/pay/transactions/native")
    assert body["amount"] == {"total": 5000, "currency": "CNY"}
    assert body["out_trade_no"] == f"topup_{order.pk}"
    assert body["notify_url"] == "https://console.example.com/billing/webhooks/wechatpay/"
    assert order.checkout_qr == f"weixin://wxpay/bizpayurl?pr=topup_{order.pk}"
    page = alice_client.get(f"/billing/orders/{order.pk}/").content.decode()
    assert "<svg" in page and "weixin://" not in page  # the code is drawn, not printed


def test_an_answer_not_signed_by_the_platform_is_refused(real_gateways, alice, monkeypatch):
    monkeypatch.setattr(real_gateways.wechat, "platform_key", rsa_key("someone-else"))
    with pytest.raises(GatewayError):
        topup_order_create(user=alice, amount_fen=5000, gateway_name="wechatpay")
    assert TopUpOrder.objects.get().status == TopUpOrder.Status.FAILED


def test_a_notification_delivered_ten_times_credits_once(real_gateways, order, alice):
    body, headers = paid_notification(real_gateways, order)
    for _ in range(10):
        response = notify(body, headers)
        assert response.status_code == 200 and response.json()["code"] == "SUCCESS"
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PAID
    assert order.gateway_reference == real_gateways.wechat.orders[f"topup_{order.pk}"]["transaction_id"]
    assert balance_get(user=alice).cash == 5000
    assert Transaction.objects.filter(kind=Transaction.Kind.TOPUP).count() == 1


def test_a_closed_notification_after_the_payment_changes_nothing(real_gateways, order, alice):
    body, headers = paid_notification(real_gateways, order)
    closed = real_gateways.wechat.notification(
        real_gateways.wechat.transaction(f"topup_{order.pk}", trade_state="CLOSED")
    )
    refund = real_gateways.wechat.notification({"out_trade_no": f"topup_{order.pk}"}, event_type="REFUND.SUCCESS")
    for delivery in (closed, (body, headers), closed, refund):  # a stale CLOSED first, a refund result last
        assert notify(*delivery).status_code == 200
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PAID and balance_get(user=alice).cash == 5000


@pytest.mark.parametrize(
    "forge",
    ["another_key", "another_apiv3_key", "stale", "tampered"],
)
def test_forged_replayed_and_tampered_notifications_are_refused(real_gateways, order, alice, forge):
    no = f"topup_{order.pk}"
    real_gateways.wechat.pay(no)
    resource = real_gateways.wechat.transaction(no)
    if forge == "another_key":
        body, headers = real_gateways.wechat.notification(resource, key=rsa_key("someone-else"))
    elif forge == "another_apiv3_key":
        body, headers = real_gateways.wechat.notification(resource, apiv3_key="0" * 32)
    elif forge == "stale":  # a captured notification replayed ten minutes later
        body, headers = real_gateways.wechat.notification(resource, timestamp=int(time.time()) - 600)
    else:
        body, headers = real_gateways.wechat.notification(resource)
        body = body.replace(b'"summary": "', b'"summary": "x')
    response = notify(body, headers)
    assert response.status_code == 401
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PENDING and balance_get(user=alice).cash == 0


@pytest.mark.parametrize(
    "changes",
    [
        {"amount": {"total": 1, "payer_total": 1, "currency": "CNY", "payer_currency": "CNY"}},
        {"amount": {"total": 5000, "payer_total": 5000, "currency": "USD", "payer_currency": "USD"}},
        {"mchid": "1900000999"},
    ],
)
def test_a_genuine_notification_for_another_amount_currency_or_merchant_is_refused(
    real_gateways, order, alice, changes
):
    body, headers = paid_notification(real_gateways, order, **changes)
    response = notify(body, headers)
    assert response.status_code == 400
    assert balance_get(user=alice).cash == 0


def test_unpaid_orders_are_queried_then_closed(real_gateways, order):
    TopUpOrder.objects.filter(pk=order.pk).update(created_at=timezone.now() - timedelta(days=2))
    assert topup_orders_expire() == 1
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.EXPIRED
    assert real_gateways.wechat.orders[f"topup_{order.pk}"]["trade_state"] == "CLOSED"
    assert [path.rsplit("/", 1)[-1] for _m, path, _b in real_gateways.wechat.calls[-2:]] == [
        f"topup_{order.pk}",
        "close",
    ]


def test_a_payment_whose_notification_was_lost_is_credited_by_the_sweep(real_gateways, order, alice):
    real_gateways.wechat.pay(f"topup_{order.pk}")
    TopUpOrder.objects.filter(pk=order.pk).update(created_at=timezone.now() - timedelta(days=2))
    assert topup_orders_expire() == 0
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PAID and balance_get(user=alice).cash == 5000


def test_an_unreachable_gateway_leaves_the_order_for_the_next_sweep(real_gateways, order, monkeypatch):
    import requests

    def down(request):
        raise requests.ConnectionError("timed out")

    monkeypatch.setattr(real_gateways.wechat, "send", down)
    TopUpOrder.objects.filter(pk=order.pk).update(created_at=timezone.now() - timedelta(days=2))
    assert topup_orders_expire() == 0
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.PENDING  # not knowing is not "unpaid"


def test_a_refund_goes_through_the_refund_api_once(real_gateways, order, alice):
    real_gateways.wechat.refund_status = "SUCCESS"
    notify(*paid_notification(real_gateways, order))
    first = topup_refund(order=order, amount_fen=5000, reason="Bought by mistake")
    assert topup_refund(order=order, amount_fen=5000, reason="Bought by mistake").pk == first.pk
    assert len(real_gateways.wechat.refunds) == 1
    (refund,) = real_gateways.wechat.refunds.values()
    assert refund["amount"] == {"refund": 5000, "total": 5000, "currency": "CNY"}
    assert first.status == Refund.Status.SUCCEEDED
    assert first.gateway_refund_id == refund["refund_id"]
    order.refresh_from_db()
    assert order.status == TopUpOrder.Status.REFUNDED and balance_get(user=alice).cash == 0


def test_a_refund_wechat_refuses_posts_nothing(real_gateways, order, alice):
    notify(*paid_notification(real_gateways, order))
    real_gateways.wechat.refund_status = "ABNORMAL"
    with pytest.raises(GatewayError):
        topup_refund(order=order, amount_fen=5000, reason="Refused upstream")
    assert not Refund.objects.exists() and balance_get(user=alice).cash == 5000


def test_the_notification_body_is_shaped_as_wechat_documents(real_gateways, order):
    body, headers = paid_notification(real_gateways, order)
    payload = json.loads(body)
    assert payload["resource"]["algorithm"] == "AEAD_AES_256_GCM" and payload["event_type"] == "TRANSACTION.SUCCESS"
    assert set(headers) == {
        "Wechatpay-Timestamp",
        "Wechatpay-Nonce",
        "Wechatpay-Signature",
        "Wechatpay-Serial",
        "Wechatpay-Signature-Type",
    }


@pytest.mark.parametrize("final", ["SUCCESS", "ABNORMAL"])
def test_a_processing_refund_is_settled_when_wechat_answers(real_gateways, order, alice, final):
    notify(*paid_notification(real_gateways, order))
    refund = topup_refund(order=order, amount_fen=2000, reason="Part back")
    assert refund.status == Refund.Status.PENDING  # WeChat Pay answered PROCESSING
    assert balance_get(user=alice).cash == 3000  # on its way back: not spendable meanwhile
    assert refunds_confirm() == {"succeeded": 0, "failed": 0, "pending": 1}
    (stored,) = real_gateways.wechat.refunds.values()
    stored["status"] = final
    outcome = refunds_confirm()
    assert refunds_confirm() == {"succeeded": 0, "failed": 0, "pending": 0}  # settled once
    refund.refresh_from_db()
    order.refresh_from_db()
    if final == "SUCCESS":
        assert outcome["succeeded"] == 1 and refund.status == Refund.Status.SUCCEEDED
        assert order.status == TopUpOrder.Status.PARTIALLY_REFUNDED and balance_get(user=alice).cash == 3000
    else:
        assert outcome["failed"] == 1 and refund.status == Refund.Status.FAILED
        assert order.status == TopUpOrder.Status.PAID and order.refunded_fen == 0
        assert balance_get(user=alice).cash == 5000  # reversed by a new posting, not an edit
        assert Txn.objects.filter(idempotency_key=f"topup:refund-reversal:{refund.key}").count() == 1


def test_a_refund_notification_settles_the_pending_refund_from_wechats_own_answer(
    real_gateways, order, alice, django_capture_on_commit_callbacks
):
    notify(*paid_notification(real_gateways, order))
    refund = topup_refund(order=order, amount_fen=5000, reason="All back")
    (stored,) = real_gateways.wechat.refunds.values()
    stored["status"] = "SUCCESS"
    body, headers = real_gateways.wechat.notification(
        {"mchid": real_gateways.wechat.MCH_ID, "out_trade_no": f"topup_{order.pk}", "refund_status": "SUCCESS"},
        event_type="REFUND.SUCCESS",
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert notify(body, headers).status_code == 200
    refund.refresh_from_db()
    assert refund.status == Refund.Status.SUCCEEDED and refund.settled_at is not None
