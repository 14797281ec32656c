"""The acting context: switching, the session key re-checked on every request, and the header switcher."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from teams import services
from teams.context import SESSION_KEY, acting_context_for
from teams.tests.conftest import add_member


def test_personal_by_default(alice_client, alice):
    response = alice_client.get("/teams/")
    assert response.wsgi_request.principal == alice
    assert response.wsgi_request.membership is None
    assert 'class="menu context-menu"' in response.content.decode()


def test_switching_to_a_team_and_back(alice_client, alice, team):
    response = alice_client.post("/teams/switch/", {"team": "lab", "next": "/instances/"})
    assert response.status_code == 302 and response["Location"] == "/instances/"
    assert alice_client.session[SESSION_KEY] == team.pk
    page = alice_client.get("/teams/")
    assert page.wsgi_request.principal == team.account
    assert page.wsgi_request.membership.team == team
    assert '<summary title="Acting as">Lab</summary>' in page.content.decode()
    alice_client.post("/teams/switch/", {"team": "personal"})
    assert SESSION_KEY not in alice_client.session
    assert alice_client.get("/teams/").wsgi_request.principal == alice


def test_a_stranger_cannot_switch_into_a_team(charlie_client, team):
    assert charlie_client.post("/teams/switch/", {"team": "lab"}).status_code == 404
    assert SESSION_KEY not in charlie_client.session


def test_an_unsafe_next_goes_to_the_dashboard(alice_client, team):
    response = alice_client.post("/teams/switch/", {"team": "lab", "next": "https://evil.example.com/"})
    assert response["Location"] == "/dashboard/"


def test_a_removed_member_loses_the_context_at_once(client_for, alice, bob, team):
    add_member(team, bob)
    bob_client = client_for(bob)
    bob_client.post("/teams/switch/", {"team": "lab"})
    assert bob_client.get("/teams/").wsgi_request.principal == team.account
    services.membership_remove(actor=alice, membership=team.memberships.get(user=bob))
    response = bob_client.get("/teams/")
    assert response.wsgi_request.principal == bob
    assert response.wsgi_request.membership is None
    assert SESSION_KEY not in bob_client.session


def test_a_deleted_team_drops_the_context(alice_client, alice, team):
    alice_client.post("/teams/switch/", {"team": "lab"})
    services.team_delete(actor=alice, team=team)
    assert alice_client.get("/teams/").wsgi_request.principal == alice


def test_the_check_costs_one_query(alice_client, team):
    with CaptureQueriesContext(connection) as personal:
        alice_client.get("/teams/")
    alice_client.post("/teams/switch/", {"team": "lab"})
    with CaptureQueriesContext(connection) as in_team:
        alice_client.get("/teams/")
    assert len(in_team.captured_queries) == len(personal.captured_queries) + 1


def test_acting_context_for_is_reusable(alice, bob, charlie, team):
    assert acting_context_for(alice, None) == (alice, None)
    principal, membership = acting_context_for(alice, team.pk)
    assert principal == team.account and membership.user == alice
    assert acting_context_for(charlie, team.pk) == (charlie, None)
    assert acting_context_for(alice, "not a number") == (alice, None)


def test_the_switcher_lists_my_teams_only(alice_client, client_for, charlie, team):
    services.team_create(user=charlie, name="Other")
    body = alice_client.get("/dashboard/").content.decode()
    assert 'name="team" value="lab"' in body
    assert 'value="other"' not in body
