"""The teams API by role: the same rules as the pages, in the console's JSON error format."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from teams.models import Invitation, Membership, Role, Team
from teams.tests.conftest import membership


@pytest.fixture
def api(request):
    def client_for(who):
        client = APIClient()
        client.force_authenticate(request.getfixturevalue(who))
        return client

    return client_for


def test_list_and_create(api, staffed, charlie):
    listed = api("bob").get("/api/v1/teams/").json()
    assert [(t["slug"], t["role"]) for t in listed["results"]] == [("lab", "member")]
    assert api("charlie").get("/api/v1/teams/").json()["results"] == []
    created = api("charlie").post("/api/v1/teams/", {"name": "Charlie's"}, format="json")
    assert created.status_code == 201
    assert created.json()["role"] == "owner"
    assert Team.objects.get(slug=created.json()["slug"]).memberships.get().user == charlie


def test_a_blank_name_is_a_400(api, db, alice):
    response = api("alice").post("/api/v1/teams/", {"name": " "}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["fields"]["name"]


def test_a_stranger_gets_404_everywhere(api, staffed):
    client = api("charlie")
    bob = staffed.memberships.get(role="member")
    assert client.get("/api/v1/teams/lab/").status_code == 404
    assert client.get("/api/v1/teams/lab/members/").status_code == 404
    assert client.patch(f"/api/v1/teams/lab/members/{bob.pk}/", {"role": "admin"}, format="json").status_code == 404
    assert client.delete(f"/api/v1/teams/lab/members/{bob.pk}/").status_code == 404
    assert client.get("/api/v1/teams/lab/invitations/").status_code == 404
    response = client.post("/api/v1/teams/lab/invitations/", {"email": "x@example.com"}, format="json")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert client.get("/api/v1/teams/lab/audit/").status_code == 404


def test_every_member_sees_the_members(api, staffed):
    for who in ["alice", "dave", "bob", "erin"]:
        members = api(who).get("/api/v1/teams/lab/members/").json()["results"]
        assert {m["email"] for m in members} == {
            "alice@example.com",
            "dave@example.com",
            "bob@example.com",
            "erin@example.com",
        }


@pytest.mark.parametrize("who", ["bob", "erin"])
def test_members_and_billing_viewers_get_403(api, staffed, who, alice):
    client = api(who)
    owner = membership(staffed, alice)
    response = client.patch(f"/api/v1/teams/lab/members/{owner.pk}/", {"role": "member"}, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert client.delete(f"/api/v1/teams/lab/members/{owner.pk}/").status_code == 403
    assert client.get("/api/v1/teams/lab/invitations/").status_code == 403
    assert client.post("/api/v1/teams/lab/invitations/", {"email": "x@example.com"}, format="json").status_code == 403
    assert client.get("/api/v1/teams/lab/audit/").status_code == 403
    assert membership(staffed, alice).role == Role.OWNER
    assert not Invitation.objects.exists()


def test_an_admin_manages_members_and_invitations(api, staffed, bob, erin):
    client = api("dave")
    target = membership(staffed, bob)
    response = client.patch(
        f"/api/v1/teams/lab/members/{target.pk}/",
        {"role": "admin", "spend_limit_fen": 10_000, "gpu_limit": 2},
        format="json",
    )
    assert response.status_code == 200
    assert (response.json()["role"], response.json()["spend_limit_fen"], response.json()["gpu_limit"]) == (
        "admin",
        10_000,
        2,
    )
    # A key left out keeps its value.
    response = client.patch(f"/api/v1/teams/lab/members/{target.pk}/", {"gpu_limit": None}, format="json")
    assert (response.json()["spend_limit_fen"], response.json()["gpu_limit"]) == (10_000, None)
    created = client.post(
        "/api/v1/teams/lab/invitations/", {"email": "new@example.com", "role": "billing"}, format="json"
    )
    assert created.status_code == 201 and created.json()["status"] == "pending"
    revoked = client.post(f"/api/v1/teams/lab/invitations/{created.json()['id']}/revoke/")
    assert revoked.status_code == 200 and revoked.json()["status"] == "revoked"
    assert client.delete(f"/api/v1/teams/lab/members/{membership(staffed, erin).pk}/").status_code == 204
    assert not Membership.objects.filter(team=staffed, user=erin).exists()
    audit = client.get("/api/v1/teams/lab/audit/").json()["results"]
    assert [e["action"] for e in audit][:3] == ["member_removed", "invitation_revoked", "member_invited"]


def test_the_last_owner_is_a_409(api, team, alice):
    response = api("alice").patch(
        f"/api/v1/teams/lab/members/{membership(team, alice).pk}/", {"role": "member"}, format="json"
    )
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "last_owner"
    response = api("alice").delete(f"/api/v1/teams/lab/members/{membership(team, alice).pk}/")
    assert response.status_code == 409


def test_inviting_a_member_is_a_409_already_member(api, staffed):
    response = api("alice").post("/api/v1/teams/lab/invitations/", {"email": "BOB@example.com"}, format="json")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "already_member" and "already a member" in error["message"]
    assert not staffed.invitations.filter(email="bob@example.com").exists()


def test_a_member_leaves_by_deleting_themself(api, staffed, bob):
    assert api("bob").delete(f"/api/v1/teams/lab/members/{membership(staffed, bob).pk}/").status_code == 204
    assert not Membership.objects.filter(team=staffed, user=bob).exists()


def test_list_query_budget(api, staffed, django_assert_max_num_queries):
    client = api("alice")
    with django_assert_max_num_queries(6):
        client.get("/api/v1/teams/lab/members/")
    with django_assert_max_num_queries(6):
        client.get("/api/v1/teams/lab/audit/")
    with django_assert_max_num_queries(6):
        client.get("/api/v1/teams/")
