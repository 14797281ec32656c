"""The daily reconciliation, on recorded bills: Alipay's zip, WeChat Pay's CSV, Stripe's balance list.

Each recorded bill settles orders 900001 (¥50), 900002 (¥100) and 900003 (¥20, ¥5 of it refunded),
and a trade of another shop on the same account. The ledger is built through the real paths to
agree, with two planted mismatches: 900002 was paid at the gateway but never credited (its
notification was lost), and 900004 was credited but is on no bill.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.utils import timezone

from billing.gateways.alipay import alipay_bill_parse
from billing.gateways.base import SettledLine, WebhookEvent
from billing.gateways.wechatpay import wechat_bill_parse
from billing.models import ReconciliationRun, TopUpOrder
from billing.payments import event_apply, topup_refund
from billing.reconciliation import reconciliation_run, reconciliation_run_all
from billing.tasks import reconciliation_task
from billing.tests.fake_gateways import FakeAlipay

RECORDED = Path(__file__).parent / "recorded"
ALIPAY_BILL = (RECORDED / "alipay_trade_bill_2026-11-30.csv").read_text()
WECHAT_BILL = (RECORDED / "wechatpay_trade_bill_2026-11-30.csv").read_text()
STRIPE_BALANCE = json.loads((RECORDED / "stripe_balance_transactions_2026-11-30.json").read_text())

EXPECTED_LINES = [
    (SettledLine.PAYMENT, 900001, 5000),
    (SettledLine.PAYMENT, 900002, 10000),
    (SettledLine.PAYMENT, 900003, 2000),
    (SettledLine.REFUND, 900003, 500),
]


def test_alipays_bill_is_read_from_its_gbk_zip():
    lines = alipay_bill_parse(FakeAlipay.bill_archive(ALIPAY_BILL))
    ours = [(line.kind, line.order_id, line.amount_fen) for line in lines if line.order_id]
    assert ours == EXPECTED_LINES
    assert [line.order_id for line in lines if line.order_id is None] == [None]  # the other shop's trade
    assert lines[3].reference == "HZ01RF0000000000000001"


def test_wechat_pays_bill_is_read_up_to_its_summary():
    lines = wechat_bill_parse(WECHAT_BILL)
    assert [(line.kind, line.order_id, line.amount_fen) for line in lines] == EXPECTED_LINES


def _ledger(alice, gateway: str, fakes) -> None:
    """Orders 900001–900004 of ``gateway``: credited through ``event_apply`` as a notification would be."""
    for pk, amount in ((900001, 5000), (900002, 10000), (900003, 2000), (900004, 3000)):
        TopUpOrder.objects.create(
            pk=pk, user=alice, amount_fen=amount, gateway=gateway, gateway_reference=f"topup_{pk}"
        )
        if pk == 900002:
            continue  # paid at the gateway, notification lost: the planted "not credited"
        reference = "pi_3Q0003" if (gateway == "stripe" and pk == 900003) else f"ref_{pk}"
        event = WebhookEvent(
            id=f"evt_{pk}",
            type=WebhookEvent.PAYMENT_SUCCEEDED,
            order_id=pk,
            amount_fen=amount,
            currency="CNY",
            reference=reference,
        )
        assert event_apply(gateway_name=gateway, event=event, digest=str(pk)).result == "credited"
    if gateway == "alipay_qr":
        fakes.alipay.pay("topup_900003", "20.00")
    if gateway == "wechatpay":
        fakes.wechat.orders["topup_900003"] = {"amount": {"total": 2000, "currency": "CNY"}, "trade_state": "SUCCESS"}
    topup_refund(order=TopUpOrder.objects.get(pk=900003), amount_fen=500, reason="Partial refund")


@pytest.mark.parametrize("gateway", ["alipay_qr", "wechatpay", "stripe"])
def test_each_gateways_bill_is_compared_with_the_ledger_and_the_planted_mismatches_listed(
    real_gateways, alice, gateway, staff, client_for
):
    real_gateways.alipay.bill = FakeAlipay.bill_archive(ALIPAY_BILL)
    real_gateways.wechat.bill = WECHAT_BILL.encode()
    real_gateways.stripe.balance_transactions = STRIPE_BALANCE
    _ledger(alice, gateway, real_gateways)
    day = timezone.localdate()

    run = reconciliation_run(gateway_name=gateway, day=day)

    assert not run.ok and run.error == ""
    assert sorted((m["kind"], m["order"], m["gateway_fen"], m["ledger_fen"]) for m in run.mismatches) == [
        ("not_credited", 900002, 10000, 0),
        ("not_settled", 900004, 0, 3000),
    ]
    assert run.settled_fen == 5000 + 10000 + 2000 - 500
    assert run.ledger_fen == 5000 + 2000 + 3000 - 500
    # Rerunning the day replaces its row.
    reconciliation_run(gateway_name=gateway, day=day)
    assert ReconciliationRun.objects.filter(gateway=gateway, day=day).count() == 1
    page = client_for(staff).get("/staff/billing/").content.decode()
    assert "not_credited" in page and "#900002" in page and "not_settled" in page


def test_a_bill_that_agrees_is_ok(real_gateways, alice):
    real_gateways.wechat.bill = "\n".join(
        line for line in WECHAT_BILL.splitlines() if "topup_900002" not in line and "topup_900003" not in line
    ).encode()
    TopUpOrder.objects.create(pk=900001, user=alice, amount_fen=5000, gateway="wechatpay")
    event = WebhookEvent(
        id="evt_1", type=WebhookEvent.PAYMENT_SUCCEEDED, order_id=900001, amount_fen=5000, currency="CNY", reference="r"
    )
    event_apply(gateway_name="wechatpay", event=event, digest="1")
    run = reconciliation_run(gateway_name="wechatpay", day=timezone.localdate())
    assert run.ok and run.mismatches == [] and run.settled_fen == run.ledger_fen == 5000


def test_a_bill_not_ready_is_recorded_and_retried_later(real_gateways, db):
    run = reconciliation_run(gateway_name="alipay_qr", day=timezone.localdate())  # no bill yet
    assert not run.ok and "isp.bill_not_exist" in run.error


def test_the_daily_task_reconciles_every_gateway_with_a_bill(real_gateways, db):
    real_gateways.wechat.bill = b""  # WeChat Pay's empty day would not even parse
    real_gateways.stripe.balance_transactions = {"object": "list", "data": [], "has_more": False, "url": "/v1/x"}
    runs = reconciliation_run_all(day=timezone.localdate())
    assert {run.gateway for run in runs} == {"alipay", "alipay_qr", "wechatpay", "stripe"}  # not the simulated one
    assert {run.gateway for run in runs if run.ok} == {"stripe"}
    assert reconciliation_task() == 3  # yesterday: no bills at the fakes but Stripe's (empty, agrees)
