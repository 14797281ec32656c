"""API tokens scoped to a team: the principal they act on, their end with the membership, the audit
events, and the pages and endpoints that make them."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import APIToken
from accounts.services import api_token_create, api_token_revoke
from billing.tests.helpers import topup
from teams import services
from teams.models import TeamEvent
from teams.tests.conftest import add_member, membership

BALANCE = "/api/v1/billing/balance/"


def call(raw: str, path: str = BALANCE, method: str = "get", **data):
    client = Client()
    return getattr(client, method)(
        path, data or None, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}"
    )


def test_a_team_token_acts_on_the_teams_wallet(alice, team):
    topup(alice, 100)
    topup(team.account, 900)
    _token, personal = api_token_create(user=alice, name="mine", expires_at=None)
    _token, scoped = api_token_create(user=alice, name="lab", expires_at=None, team_id=team.pk)
    assert call(personal).json()["cash_fen"] == 100
    assert call(scoped).json()["cash_fen"] == 900
    assert call(scoped, "/api/v1/account/profile/").json()["email"] == "alice@example.com"  # still the person


def test_the_token_keeps_the_role_of_its_maker(staffed):
    bob = staffed.memberships.get(role="member").user
    _token, raw = api_token_create(user=bob, name="lab", expires_at=None, team_id=staffed.pk)
    response = call(raw)
    assert response.status_code == 403  # a member has no billing.view in the team
    assert response.json()["error"]["code"] == "permission_denied"


def test_a_former_members_team_token_stops_at_once(alice, bob, team):
    add_member(team, bob, "admin")
    _token, raw = api_token_create(user=bob, name="lab", expires_at=None, team_id=team.pk)
    assert call(raw).status_code == 200
    services.membership_remove(actor=alice, membership=membership(team, bob))
    response = call(raw)
    assert response.status_code == 401
    assert response.json()["error"]["message"].startswith("This API token acts in a team you are no longer")
    _token, personal = api_token_create(user=bob, name="mine", expires_at=None)
    assert call(personal).status_code == 200  # bob's personal tokens are unaffected


def test_a_deleted_teams_token_stops(alice, team):
    _token, raw = api_token_create(user=alice, name="lab", expires_at=None, team_id=team.pk)
    services.team_delete(actor=alice, team=team)
    assert call(raw).status_code == 401


def test_a_read_only_team_token_still_cannot_spend(alice, team):
    topup(alice, 1_000)
    _token, raw = api_token_create(user=alice, name="ro", expires_at=None, scope="read", team_id=team.pk)
    assert call(raw).status_code == 200
    response = call(raw, f"/api/v1/teams/{team.slug}/wallet/transfers/", "post", direction="in", amount_fen=1)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "read_only_token"


def test_a_token_for_a_team_i_am_not_in_is_refused(alice, charlie, team):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        api_token_create(user=charlie, name="lab", expires_at=None, team_id=team.pk)
    assert not APIToken.objects.filter(user=charlie).exists()


def test_creating_and_revoking_a_team_token_is_audited(alice, team):
    token, _raw = api_token_create(user=alice, name="lab-ci", expires_at=None, team_id=team.pk)
    api_token_revoke(token=token)
    api_token_revoke(token=token)  # twice: one event
    events = list(TeamEvent.objects.filter(team=team, action__startswith="token_").order_by("id"))
    assert [(e.action, e.target, e.actor) for e in events] == [
        (TeamEvent.Action.TOKEN_CREATED, "lab-ci", alice),
        (TeamEvent.Action.TOKEN_REVOKED, "lab-ci", alice),
    ]
    api_token_create(user=alice, name="personal", expires_at=None)
    assert TeamEvent.objects.filter(team=team, action__startswith="token_").count() == 2


def test_the_tokens_page_offers_my_teams(alice_client, alice, team, charlie):
    page = alice_client.get("/account/api-tokens/").content.decode()
    assert 'id="id_team"' in page and "Lab" in page
    response = alice_client.post(
        "/account/api-tokens/", {"name": "ci", "expires": "30", "scope": "full", "team": str(team.pk)}
    )
    assert response.status_code == 201
    assert APIToken.objects.get(name="ci").team == team
    other = services.team_create(user=charlie, name="Other")
    response = alice_client.post("/account/api-tokens/", {"name": "x", "expires": "30", "team": str(other.pk)})
    assert response.status_code == 400
    assert not APIToken.objects.filter(name="x").exists()


def test_the_page_without_teams_has_no_team_choice(charlie_client):
    assert 'id="id_team"' not in charlie_client.get("/account/api-tokens/").content.decode()


def test_the_api_makes_a_team_token_by_slug(alice_client, team, charlie):
    response = alice_client.post(
        "/api/v1/account/tokens/", {"name": "ci", "team": "lab"}, content_type="application/json"
    )
    assert response.status_code == 201
    assert response.json()["team"] == "lab"
    assert call(response.json()["token"]).status_code == 200
    services.team_create(user=charlie, name="Other")
    response = alice_client.post(
        "/api/v1/account/tokens/", {"name": "x", "team": "other"}, content_type="application/json"
    )
    assert response.status_code == 404
    listed = alice_client.get("/api/v1/account/tokens/").json()["results"]
    assert [t["team"] for t in listed] == ["lab"]


def test_a_team_token_reaches_its_team_alone(alice, team):
    other = services.team_create(user=alice, name="Other")
    _token, raw = api_token_create(user=alice, name="lab", expires_at=None, team_id=team.pk)
    assert [t["slug"] for t in call(raw, "/api/v1/teams/").json()["results"]] == ["lab"]
    assert call(raw, "/api/v1/teams/lab/members/").status_code == 200
    assert call(raw, f"/api/v1/teams/{other.slug}/members/").status_code == 404
    assert call(raw, f"/api/v1/teams/{other.slug}/wallet/").status_code == 404
    _token, personal = api_token_create(user=alice, name="mine", expires_at=None)
    assert call(personal, f"/api/v1/teams/{other.slug}/members/").status_code == 200


def test_a_team_token_cannot_change_its_makers_account(alice, team):
    _token, raw = api_token_create(user=alice, name="lab", expires_at=None, team_id=team.pk)
    response = call(raw, "/api/v1/account/tokens/", "post", name="escalate")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "team_token"
    assert not APIToken.objects.filter(name="escalate").exists()
    assert call(raw, "/api/v1/account/ssh-keys/", "post", name="k", public_key="ssh-ed25519 AAAA").status_code == 403
    assert call(raw, "/api/v1/account/profile/", "patch", display_name="X").status_code == 403
    assert call(raw, "/api/v1/account/tokens/").status_code == 200  # reading is fine
