"""Every team page by role: owners and admins act, a member sees the list without buttons, a billing
viewer cannot invite, a stranger gets 404."""

from __future__ import annotations

import pytest
from django.core import mail

from teams.models import Invitation, Membership, Role, Team, TeamEvent
from teams.tests.conftest import membership

PERSONAS = ["alice", "dave", "bob", "erin"]


@pytest.fixture
def as_(client_for, request):
    return lambda who: client_for(request.getfixturevalue(who))


def test_my_teams_page_lists_and_creates(alice_client, staffed):
    body = alice_client.get("/teams/").content.decode()
    assert "/teams/lab/" in body
    response = alice_client.post("/teams/", {"name": "Second"})
    assert response.status_code == 302 and response["Location"] == "/teams/second/"
    assert Team.objects.filter(slug="second").exists()


def test_a_blank_name_is_a_form_error(alice_client, db):
    assert alice_client.post("/teams/", {"name": "  "}).status_code == 400
    assert not Team.objects.exists()


def test_the_account_menu_links_teams(alice_client):
    assert 'href="/teams/"' in alice_client.get("/dashboard/").content.decode()


@pytest.mark.parametrize("who,buttons", [("alice", True), ("dave", True), ("bob", False), ("erin", False)])
def test_the_team_page_shows_actions_by_role(staffed, as_, who, buttons):
    response = as_(who).get("/teams/lab/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "bob@example.com" in body and "erin@example.com" in body  # everyone sees the members
    assert ("/members/" in body) is buttons
    assert ('action="/teams/lab/invite/"' in body) is buttons
    assert ('href="/teams/lab/audit/"' in body) is buttons


def test_a_stranger_gets_404_on_every_team_page(staffed, charlie_client):
    bob = membership(staffed, staffed.memberships.get(role="member").user)
    for url in ["/teams/lab/", "/teams/lab/audit/"]:
        assert charlie_client.get(url).status_code == 404
    posts = {
        "/teams/lab/invite/": {"email": "x@example.com", "role": "member"},
        "/teams/lab/rename/": {"name": "Mine"},
        "/teams/lab/delete/": {},
        "/teams/lab/leave/": {},
        f"/teams/lab/members/{bob.pk}/role/": {"role": "owner"},
        f"/teams/lab/members/{bob.pk}/limits/": {"spend_limit": "1"},
        f"/teams/lab/members/{bob.pk}/remove/": {},
    }
    for url, data in posts.items():
        assert charlie_client.post(url, data).status_code == 404, url
    assert Membership.objects.filter(team=staffed).count() == 4


@pytest.mark.parametrize("who", ["bob", "erin"])
def test_members_and_billing_viewers_are_refused_every_action(staffed, as_, who, alice):
    client = as_(who)
    target = membership(staffed, alice)
    assert client.get("/teams/lab/audit/").status_code == 403
    assert client.post("/teams/lab/invite/", {"email": "x@example.com", "role": "member"}).status_code == 403
    assert client.post("/teams/lab/rename/", {"name": "Mine"}).status_code == 403
    assert client.post("/teams/lab/delete/").status_code == 403
    assert client.post(f"/teams/lab/members/{target.pk}/role/", {"role": "member"}).status_code == 403
    assert client.post(f"/teams/lab/members/{target.pk}/limits/", {"spend_limit": "1"}).status_code == 403
    assert client.post(f"/teams/lab/members/{target.pk}/remove/").status_code == 403
    assert not Invitation.objects.exists()
    assert membership(staffed, alice).role == Role.OWNER


def test_an_admin_invites_changes_roles_limits_and_removes(staffed, as_, bob, erin):
    client = as_("dave")
    response = client.post("/teams/lab/invite/", {"email": "new@example.com", "role": "member"})
    assert response.status_code == 302
    assert mail.outbox[-1].to == ["new@example.com"]
    invitation = Invitation.objects.get()
    assert "new@example.com" in client.get("/teams/lab/").content.decode()
    client.post(f"/teams/lab/invitations/{invitation.pk}/revoke/")
    assert Invitation.objects.get().status == Invitation.Status.REVOKED
    client.post(f"/teams/lab/members/{membership(staffed, bob).pk}/role/", {"role": "admin"})
    assert membership(staffed, bob).role == Role.ADMIN
    client.post(
        f"/teams/lab/members/{membership(staffed, bob).pk}/limits/", {"spend_limit": "¥1,000.50", "gpu_limit": "4"}
    )
    assert (membership(staffed, bob).spend_limit_fen, membership(staffed, bob).gpu_limit) == (100_050, 4)
    client.post(f"/teams/lab/members/{membership(staffed, erin).pk}/remove/")
    assert not Membership.objects.filter(team=staffed, user=erin).exists()


def test_an_admin_cannot_touch_an_owner_from_the_page(staffed, as_, alice):
    client = as_("dave")
    response = client.post(f"/teams/lab/members/{membership(staffed, alice).pk}/role/", {"role": "member"})
    assert response.status_code == 403
    assert membership(staffed, alice).role == Role.OWNER


def test_the_last_owner_sees_why_she_cannot_leave(alice_client, team):
    response = alice_client.post("/teams/lab/leave/", follow=True)
    assert "last owner" in response.content.decode()
    assert membership(team, team.created_by).role == Role.OWNER


def test_bad_invite_input_is_a_form_error(alice_client, team, alice):
    assert alice_client.post("/teams/lab/invite/", {"email": "nope", "role": "member"}).status_code == 400
    response = alice_client.post("/teams/lab/invite/", {"email": "alice@example.com", "role": "member"})
    assert response.status_code == 400
    assert "already a member" in response.content.decode()


def test_bad_limits_are_a_message_not_a_500(alice_client, team, alice):
    me = membership(team, alice)
    response = alice_client.post(f"/teams/lab/members/{me.pk}/limits/", {"spend_limit": "-5"}, follow=True)
    assert response.status_code == 200
    assert membership(team, alice).spend_limit_fen is None


def test_the_audit_page_pages(alice_client, team, alice):
    for n in range(60):
        TeamEvent.objects.create(team=team, actor=alice, action="team_renamed", target=f"name {n}")
    first = alice_client.get("/teams/lab/audit/").content.decode()
    assert "name 59" in first and "Page 1 of 2" in first
    second = alice_client.get("/teams/lab/audit/?page=2").content.decode()
    assert "Team created" in second
    assert alice_client.get("/teams/lab/audit/?page=abc").status_code == 200


def test_an_owner_deletes_the_team_from_the_page(alice_client, team):
    response = alice_client.post("/teams/lab/delete/")
    assert response.status_code == 302 and response["Location"] == "/teams/"
    assert alice_client.get("/teams/lab/").status_code == 404


def test_the_invitation_page_for_the_signed_in_addressee(client_for, team, alice, bob):
    from teams import services

    _, token = services.invitation_create(
        actor=alice, team=team, email="bob@example.com", role="member", site_url="http://testserver/"
    )
    client = client_for(bob)
    body = client.get(f"/teams/invitations/{token}/").content.decode()
    assert 'value="accept"' in body
    response = client.post(f"/teams/invitations/{token}/", {"action": "accept"})
    assert response["Location"] == "/teams/lab/"
    # Accepting switches to the team.
    assert client.get("/teams/").wsgi_request.principal == team.account
    assert "already been accepted" in client.get(f"/teams/invitations/{token}/").content.decode()


def test_the_invitation_page_warns_someone_else(client_for, team, alice, charlie):
    from teams import services

    _, token = services.invitation_create(
        actor=alice, team=team, email="bob@example.com", role="member", site_url="http://testserver/"
    )
    client = client_for(charlie)
    assert "This invitation was sent to bob@example.com" in client.get(f"/teams/invitations/{token}/").content.decode()
    response = client.post(f"/teams/invitations/{token}/", {"action": "accept"}, follow=True)
    assert not Membership.objects.filter(team=team, user=charlie).exists()
    assert "Log in with that address" in response.content.decode()


def test_the_pages_render_in_chinese(alice_client, staffed):
    alice_client.cookies["django_language"] = "zh-hans"
    for url in ["/teams/", "/teams/lab/", "/teams/lab/audit/"]:
        assert alice_client.get(url).status_code == 200
