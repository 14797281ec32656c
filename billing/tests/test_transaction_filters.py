"""Transactions filter by kind and by day (both ends included), and refuse bad dates with a 400."""

from datetime import timedelta

from django.utils import timezone

from billing.services import trial_claim
from billing.tests.gateway_helpers import paid_order

URL = "/api/v1/billing/transactions/"


def _kinds(client, params) -> list[str]:
    response = client.get(URL, params)
    assert response.status_code == 200, response.content
    return sorted(row["kind"] for row in response.json()["results"])


def test_it_filters_by_kind_and_by_day_with_both_ends_included(alice, alice_client):
    trial_claim(user=alice)
    paid_order(alice, 5000)
    today = timezone.localdate()
    day = timedelta(days=1)
    assert _kinds(alice_client, {"kind": "topup"}) == ["topup"]
    assert _kinds(alice_client, {"date_from": today, "date_to": today}) == ["topup", "trial_grant"]
    assert _kinds(alice_client, {"date_to": today - day}) == []
    assert _kinds(alice_client, {"date_from": today + day}) == []
    amounts = [row["amount_fen"] for row in alice_client.get(URL, {"ordering": "amount_fen"}).json()["results"]]
    assert amounts == sorted(amounts)


def test_a_bad_date_or_kind_is_a_400_naming_it(alice_client):
    for params in ({"date_from": "yesterday"}, {"kind": "free-money"}, {"ordering": "user"}):
        response = alice_client.get(URL, params)
        assert response.status_code == 400
        assert list(response.json()["error"]["fields"]) == list(params)


def test_an_empty_date_or_kind_is_a_400_not_the_unfiltered_list(alice_client):
    for params in ({"date_to": ""}, {"date_from": " "}, {"kind": ""}):
        response = alice_client.get(URL, params)
        assert response.status_code == 400, params
        assert list(response.json()["error"]["fields"]) == list(params)
