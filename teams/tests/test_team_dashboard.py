"""The dashboard in a team's context shows the team's figures (balance, runway, spend, instances), not the
person's, and each role sees only its part: a billing viewer the money, a member the instances."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from billing.tests.helpers import topup
from instances.models import Instance
from instances.tests.conftest import catalogue, fund, running  # noqa: F401 (a fixture, and helpers)


def acting(client, slug="lab"):
    assert client.post("/teams/switch/", {"team": slug}).status_code == 302
    return client


@pytest.fixture
def team_world(staffed, alice, catalogue):  # noqa: F811 (the fixture imported above)
    """alice holds ¥1,000 herself; the team ¥123.45 and bob's running instance."""
    fund(alice, 100_000)
    topup(staffed.account, 12_345)
    instance = running(staffed.account, name="bobs-run")
    Instance.objects.filter(pk=instance.pk).update(created_by=person(staffed, "member"))
    return staffed


def person(team, role):
    return team.memberships.select_related("user").get(role=role).user


def _page(client) -> str:
    response = client.get("/dashboard/")
    assert response.status_code == 200
    return response.content.decode()


def test_the_owner_sees_the_teams_money_and_instances_not_her_own(client_for, alice, team_world):
    page = _page(acting(client_for(alice)))
    assert "¥123.45" in page and "¥1,000.00" not in page
    assert 'id="money"' in page and 'id="team-instances"' in page
    assert "bobs-run" in page and "Bob" in page
    assert "Lab" in page


def test_a_billing_viewer_sees_the_money_but_no_instances(client_for, team_world):
    page = _page(acting(client_for(person(team_world, "billing"))))
    assert "¥123.45" in page
    assert 'id="team-instances"' not in page and "bobs-run" not in page


def test_a_member_sees_the_instances_but_not_the_money(client_for, bob, team_world):
    page = _page(acting(client_for(bob)))
    assert 'id="team-instances"' in page and "bobs-run" in page
    assert 'id="money"' not in page and "¥123.45" not in page


def test_back_in_personal_the_dashboard_is_alices_own(client_for, alice, team_world):
    client = acting(client_for(alice))
    client.post("/teams/switch/", {"team": "personal"})
    page = _page(client)
    assert "¥1,000.00" in page and "¥123.45" not in page
    assert 'id="team-instances"' not in page


def test_the_teams_dashboard_asks_a_bounded_number_of_queries(client_for, alice, team_world):
    client = acting(client_for(alice))
    _page(client)
    with CaptureQueriesContext(connection) as one:
        _page(client)
    for n in range(3):
        Instance.objects.filter(pk=running(team_world.account, name=f"more-{n}").pk).update(
            created_by=person(team_world, "admin")
        )
    with CaptureQueriesContext(connection) as four:
        _page(client)
    assert len(four) == len(one), [q["sql"] for q in four.captured_queries]
