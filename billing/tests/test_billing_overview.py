"""The billing page: balance split, runway, spend chart, recent transactions, top-up form, orders."""

import re
from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from billing.services import meter_start, meter_stop, sku_upsert, trial_claim
from billing.tests.gateway_helpers import paid_order, pending_order


def test_an_empty_account_sees_what_to_do(alice_client):
    page = alice_client.get("/billing/").content.decode()
    assert "Nothing running" in page
    assert "No transactions yet" in page and "No top-ups yet" in page
    assert "No usage in the last 30 days" in page
    for preset in ("¥10.00", "¥50.00", "¥100.00", "¥500.00"):
        assert preset in page


def test_it_shows_balances_runway_chart_and_history(alice, alice_client):
    gpu = sku_upsert(code="gpu-l40", name="L40S", unit="card-hour", price_fen=300, unit_seconds=3600)
    trial_claim(user=alice)
    paid_order(alice, 10000)
    pending_order(alice, 2000)
    start = timezone.now() - timedelta(hours=2)
    meter_start(user=alice, sku=gpu, quantity=1, ref="inst-done", description="Done box", at=start)
    meter_stop(ref="inst-done", at=start + timedelta(hours=1))  # ¥3.00
    meter_start(user=alice, sku=gpu, quantity=1, ref="inst-live", at=timezone.now())
    page = alice_client.get("/billing/").content.decode()
    assert "¥100.00" in page  # paid
    assert "¥7.00" in page  # trial credit left after ¥3 of usage
    assert "¥107.00" in page  # total
    assert "(¥3.00/h) your balance lasts 1 d 11 h" in page  # ¥107 at ¥3/h: 35 h 40 min
    main = page[page.index('id="content"') :]  # the chart, not the header's bell icon
    svg = main[main.index("<svg") : main.index("</svg>")]
    assert len(re.findall(r"<rect ", svg)) == 30
    assert "¥3</title>" in svg or "¥3.00</title>" in svg
    assert "Done box" in page and "+¥100.00" in page and "-¥3.00" in page
    assert "Awaiting payment" in page and "Paid" in page


def test_the_overview_has_a_query_budget(alice, alice_client):
    paid_order(alice, 10000)
    for _ in range(5):
        pending_order(alice, 1000)
    with CaptureQueriesContext(connection) as few:
        alice_client.get("/billing/")
    for _ in range(10):
        paid_order(alice, 1000)
    with CaptureQueriesContext(connection) as many:
        alice_client.get("/billing/")
    assert len(many) == len(few)
    assert len(many) <= 16


def test_transactions_page_filters_by_kind(alice, alice_client):
    trial_claim(user=alice)
    paid_order(alice, 10000)
    page = alice_client.get("/billing/transactions/?kind=topup").content.decode()
    assert "Top-up #" in page and "+¥10.00" not in page
    assert alice_client.get("/billing/transactions/?kind=bogus&page=zzz").status_code == 200
