"""The dashboard shows what the money does: the balance, the hourly burn and how long it lasts, and
this month's spending against the budget."""

from __future__ import annotations

from django.urls import reverse

from budgets.services import budget_set
from budgets.tests.test_budgets import spend
from instances.tests.conftest import running


def test_the_runway_and_the_budget_show_on_the_dashboard(rich_alice, alice_client):
    running(rich_alice)
    budget_set(user=rich_alice, monthly_limit_fen=40_000)
    spend(rich_alice, 10_000)
    html = alice_client.get(reverse("dashboard")).content.decode()
    assert 'id="money"' in html
    assert "¥100.00" in html and "of ¥400.00" in html and 'aria-valuenow="25"' in html
    assert "/h" in html and "nothing is running" not in html


def test_without_a_budget_it_offers_one(alice, alice_client):
    html = alice_client.get(reverse("dashboard")).content.decode()
    assert "Set a monthly budget" in html and "nothing is running" in html
