"""The billing REST API: balance, transactions, top-up orders and statements, scoped to the caller."""

from datetime import timedelta

import pytest
from django.utils import timezone

from billing.models import TopUpOrder
from billing.services import meter_start, meter_stop, sku_upsert, trial_claim
from billing.tests.gateway_helpers import paid_order

API = "/api/v1/billing"


@pytest.fixture
def gpu(db):
    return sku_upsert(code="gpu-4090", name="RTX 4090", unit="card-hour", price_fen=360, unit_seconds=3600)


def test_balance_splits_trial_and_paid_money_and_gives_the_runway(alice, alice_client, gpu):
    trial_claim(user=alice)
    paid_order(alice, 5000)
    meter_start(user=alice, sku=gpu, quantity=1, ref="inst-run", at=timezone.now())
    body = alice_client.get(f"{API}/balance/").json()
    assert body["currency"] == "CNY"
    assert (body["cash_fen"], body["trial_fen"], body["total_fen"]) == (5000, 1000, 6000)
    assert body["burn_fen_per_hour"] == 360
    assert 59_000 <= body["runway_seconds"] <= 60_000  # ¥60 at ¥3.60/h: about 16 h 40 min


def test_balance_without_anything_running_has_no_runway(alice_client):
    body = alice_client.get(f"{API}/balance/").json()
    assert body["runway_seconds"] is None and body["burn_fen_per_hour"] == 0 and body["total_fen"] == 0


def test_transactions_page_and_filter_by_kind(alice, alice_client, gpu):
    trial_claim(user=alice)
    paid_order(alice, 5000)
    start = timezone.now() - timedelta(hours=1)
    meter_start(user=alice, sku=gpu, quantity=1, ref="inst-tx", at=start)
    meter_stop(ref="inst-tx", at=start + timedelta(minutes=10))
    body = alice_client.get(f"{API}/transactions/").json()
    assert body["count"] == 3
    kinds = [row["kind"] for row in body["results"]]
    assert sorted(kinds) == ["topup", "trial_grant", "usage"]
    usage = next(row for row in body["results"] if row["kind"] == "usage")
    assert usage["amount_fen"] == -60 and usage["trial_fen"] == -60 and usage["cash_fen"] == 0  # trial credit first
    assert usage["metadata"]["ref"] == "inst-tx"
    only = alice_client.get(f"{API}/transactions/?kind=topup").json()
    assert [row["kind"] for row in only["results"]] == ["topup"]
    assert only["results"][0]["amount_fen"] == 5000
    paged = alice_client.get(f"{API}/transactions/?page_size=2").json()
    assert len(paged["results"]) == 2 and paged["next"]


def test_an_unknown_kind_is_a_400(alice_client):
    response = alice_client.get(f"{API}/transactions/?kind=free-money")
    assert response.status_code == 400
    assert "kind" in response.json()["error"]["fields"]


def test_creating_an_order_returns_the_checkout_url(alice, alice_client):
    response = alice_client.post(f"{API}/orders/", {"amount": "88.80"}, content_type="application/json")
    assert response.status_code == 201
    body = response.json()
    order = TopUpOrder.objects.get(pk=body["id"])
    assert order.user == alice and order.amount_fen == 8880 and body["status"] == "pending"
    assert body["checkout_url"] == f"http://testserver/billing/simulated-gateway/{order.pk}/"
    by_fen = alice_client.post(f"{API}/orders/", {"amount_fen": 1000}, content_type="application/json")
    assert by_fen.status_code == 201 and by_fen.json()["amount_fen"] == 1000


def test_orders_list_and_detail(alice, alice_client):
    order = paid_order(alice, 5000)
    listing = alice_client.get(f"{API}/orders/").json()
    assert [row["id"] for row in listing["results"]] == [order.pk]
    detail = alice_client.get(f"{API}/orders/{order.pk}/").json()
    assert detail["status"] == "paid" and detail["amount_fen"] == 5000 and detail["paid_at"]


def test_charlie_gets_a_404_for_alices_order(alice, charlie_client):
    order = paid_order(alice, 5000)
    response = charlie_client.get(f"{API}/orders/{order.pk}/")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert charlie_client.get(f"{API}/orders/").json()["results"] == []


def test_statements_list_and_detail(alice, alice_client, gpu):
    paid_order(alice, 5000)
    start = timezone.now() - timedelta(hours=2)
    meter_start(user=alice, sku=gpu, quantity=2, ref="inst-st", description="My box", at=start)
    meter_stop(ref="inst-st", at=start + timedelta(seconds=5400))
    month = timezone.localdate().strftime("%Y-%m")
    months = alice_client.get(f"{API}/statements/").json()["results"]
    assert months[0]["month"] == month
    assert months[0]["usage_fen"] == 1080 and months[0]["closing_fen"] == 5000 - 1080
    detail = alice_client.get(f"{API}/statements/{month}/").json()
    assert detail["summary"]["topups_fen"] == 5000
    assert detail["lines_total_fen"] == detail["summary"]["usage_fen"] == 1080
    (line,) = detail["lines"]
    assert line["resource"] == "inst-st" and line["description"] == "My box"
    assert line["seconds"] == 5400 and line["quantity"] == 2 and line["price_fen"] == 360
    assert line["amount_fen"] == 1080
    assert line["start"].endswith("+08:00")


def test_the_api_needs_authentication(client, db):
    response = client.get(f"{API}/balance/")
    assert response.status_code in (401, 403)
    assert "error" in response.json()


def test_list_endpoints_have_a_query_budget(alice, alice_client):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    paid_order(alice, 1000)
    counts = {}
    for n in (1, 8):
        for _ in range(n):
            paid_order(alice, 1000)
        for url in (f"{API}/transactions/", f"{API}/orders/", f"{API}/statements/"):
            with CaptureQueriesContext(connection) as queries:
                assert alice_client.get(url).status_code == 200
            counts.setdefault(url, []).append(len(queries))
    for url, (few, many) in counts.items():
        assert few == many, url
        assert many <= 6, url
