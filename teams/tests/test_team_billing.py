"""Billing in a team's context: the team's wallet on every billing page and endpoint, by role; top-ups
credit the team; no trial credit for a team; statements per member and per instance, with CSV."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from billing.models import TopUpOrder, Transaction
from billing.selectors import balance_get, trial_claimed
from billing.services import TrialUnavailable, trial_claim
from billing.settlement import meters_settle_all
from billing.tests.helpers import topup
from instances.models import Instance
from instances.tests.conftest import catalogue, running  # noqa: F401 (a fixture, and a helper)


def acting(client, slug="lab"):
    assert client.post("/teams/switch/", {"team": slug}).status_code == 302
    return client


def person(team, role):
    return team.memberships.select_related("user").get(role=role).user


def test_the_overview_shows_the_teams_wallet_not_mine(client_for, alice, team):
    topup(alice, 4_321)
    topup(team.account, 1_234)
    client = client_for(alice)
    assert "¥43.21" in client.get("/billing/").content.decode()
    page = acting(client).get("/billing/").content.decode()
    assert "¥12.34" in page and "¥43.21" not in page
    assert "/teams/lab/wallet/" in page


@pytest.mark.parametrize("path", ["/billing/", "/billing/transactions/", "/billing/statements/"])
def test_billing_viewers_see_the_teams_billing_and_members_get_403(client_for, staffed, path):
    erin, bob = person(staffed, "billing"), person(staffed, "member")
    assert acting(client_for(erin)).get(path).status_code == 200
    response = acting(client_for(bob)).get(path)
    assert response.status_code == 403
    assert client_for(bob).get(path).status_code == 200  # their own billing, in Personal


def test_a_month_statement_and_its_csv_need_billing_view(client_for, staffed):
    month = f"{timezone.localdate():%Y-%m}"
    erin, bob = person(staffed, "billing"), person(staffed, "member")
    for url in (f"/billing/statements/{month}/", f"/billing/statements/{month}.csv"):
        assert acting(client_for(erin)).get(url).status_code == 200
        assert acting(client_for(bob)).get(url).status_code == 403


def test_a_top_up_in_the_team_credits_the_team(client_for, alice, team):
    client = acting(client_for(alice))
    response = client.post("/billing/top-up/", {"preset": "5000"})
    assert response.status_code == 302
    order = TopUpOrder.objects.get()
    assert order.user == team.account
    client.post(f"/billing/simulated-gateway/{order.pk}/", {"action": "approve"})
    assert balance_get(user=team.account).cash == 5_000
    assert balance_get(user=alice).cash == 0
    assert client.get(f"/billing/orders/{order.pk}/").status_code == 200
    assert client_for(alice).get(f"/billing/orders/{order.pk}/").status_code == 404  # not in Personal


@pytest.mark.parametrize("role", ["billing", "member"])
def test_only_owners_and_admins_top_up_the_team(client_for, staffed, role):
    client = acting(client_for(person(staffed, role)))
    assert client.post("/billing/top-up/", {"preset": "5000"}).status_code == 403
    assert not TopUpOrder.objects.exists()
    if role == "billing":
        assert "owners and admins top up" in client.get("/billing/").content.decode()


def test_the_api_reads_the_teams_wallet_in_the_teams_context(client_for, staffed):
    topup(staffed.account, 777)
    erin = person(staffed, "billing")
    client = acting(client_for(erin))
    assert client.get("/api/v1/billing/balance/").json()["cash_fen"] == 777
    assert (
        client.post("/api/v1/billing/orders/", {"amount_fen": 5000}, content_type="application/json").status_code == 403
    )
    bob_client = acting(client_for(person(staffed, "member")))
    response = bob_client.get("/api/v1/billing/balance/")
    assert response.status_code == 403 and response.json()["error"]["code"] == "permission_denied"


def test_a_team_gets_no_trial_credit(client_for, alice, team):
    with pytest.raises(TrialUnavailable, match="team"):
        trial_claim(user=team.account)
    client = acting(client_for(alice))
    response = client.post("/billing/trial/claim/", {"next": "/billing/"}, follow=True)
    assert "A team gets no trial credit" in response.content.decode()
    assert not trial_claimed(user=team.account) and not trial_claimed(user=alice)
    assert "trial-claim" not in client.get("/").content.decode()


# --- Statements per member and per instance -----------------------------------------------------------


@pytest.fixture
def team_usage(staffed, catalogue):  # noqa: F811 (the fixture imported above)
    """Two instances on the team's account, launched by alice and bob, an hour of use each."""
    topup(staffed.account, 1_000_000)
    made = {}
    for who, name in (("owner", "alices-run"), ("member", "bobs-run")):
        instance = running(staffed.account, name=name)
        Instance.objects.filter(pk=instance.pk).update(created_by=person(staffed, who))
        made[who] = instance
    meters_settle_all(now=timezone.now() + timedelta(hours=1))
    return made


def test_the_teams_statement_breaks_usage_down_per_member_and_instance(client_for, staffed, team_usage):
    month = f"{timezone.localdate():%Y-%m}"
    page = acting(client_for(person(staffed, "billing"))).get(f"/billing/statements/{month}/").content.decode()
    assert 'id="usage-by-member"' in page and 'id="usage-by-instance"' in page
    assert "Alice" in page and "Bob" in page and "alices-run" in page and "bobs-run" in page


def test_the_breakdowns_as_csv_add_up_to_the_usage(client_for, staffed, team_usage):
    month = f"{timezone.localdate():%Y-%m}"
    client = acting(client_for(person(staffed, "billing")))
    members = list(csv.reader(io.StringIO(client.get(f"/billing/statements/{month}/members.csv").content.decode())))
    assert members[0] == ["member_id", "member", "lines", "seconds", "amount_cny"]
    by_name = {row[1]: row for row in members[1:]}
    assert set(by_name) == {"Alice", "Bob"}
    assert by_name["Bob"][0] == str(person(staffed, "member").pk)
    instances = list(csv.reader(io.StringIO(client.get(f"/billing/statements/{month}/instances.csv").content.decode())))
    assert instances[0] == ["resource", "name", "launched_by", "lines", "seconds", "amount_cny"]
    assert {(row[1], row[2]) for row in instances[1:]} == {("alices-run", "Alice"), ("bobs-run", "Bob")}
    usage = -sum(
        e.amount
        for t in Transaction.objects.filter(kind="usage", user=staffed.account)
        for e in t.entries.filter(account__owner=staffed.account)
    )
    assert usage > 0
    to_fen = lambda text: int(text.replace(".", ""))  # noqa: E731
    assert sum(to_fen(row[4]) for row in members[1:]) == usage
    assert sum(to_fen(row[5]) for row in instances[1:]) == usage


def test_the_member_breakdown_is_a_teams_only(alice_client):
    month = f"{timezone.localdate():%Y-%m}"
    assert alice_client.get(f"/billing/statements/{month}/members.csv").status_code == 404
    assert alice_client.get(f"/billing/statements/{month}/instances.csv").status_code == 200


def test_the_statement_api_carries_the_breakdowns(client_for, staffed, team_usage):
    month = f"{timezone.localdate():%Y-%m}"
    client = acting(client_for(person(staffed, "owner")))
    body = client.get(f"/api/v1/billing/statements/{month}/").json()
    assert {row["label"] for row in body["by_member"]} == {"Alice", "Bob"}
    assert {row["label"] for row in body["by_resource"]} == {"alices-run", "bobs-run"}


def test_a_token_less_api_client_in_personal_is_unchanged(alice):
    client = APIClient()
    client.force_authenticate(alice)
    assert client.get("/api/v1/billing/balance/").json()["cash_fen"] == 0
