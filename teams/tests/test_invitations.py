"""Invitations: sent, accepted, declined, revoked, expired, and sent to an address with no account yet."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from allauth.account.models import EmailAddress
from django.core import mail
from django.utils import timezone

from accounts.tests.factories import UserFactory
from teams import services
from teams.errors import AlreadyMember, InvitationUnusable, TeamForbidden, TeamInvalid
from teams.models import Invitation, Membership, Role, TeamEvent
from teams.tasks import invitations_expire_task
from teams.tests.conftest import add_member

SITE = "https://console.example.com/"


def invite(team, actor, email, role=Role.MEMBER):
    return services.invitation_create(actor=actor, team=team, email=email, role=role, site_url=SITE)


def test_an_invitation_mails_a_link_and_stores_only_its_digest(team, alice):
    invitation, token = invite(team, alice, "Bob@Example.com")
    assert invitation.email == "bob@example.com"
    assert invitation.digest == services.token_digest(token)
    assert token not in invitation.digest
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["bob@example.com"]
    assert "Lab" in message.subject
    assert f"{SITE}teams/invitations/{token}/" in message.body
    assert TeamEvent.objects.filter(team=team, action="member_invited", target="bob@example.com").count() == 1


def test_accepting_joins_with_the_role(team, alice, bob):
    _, token = invite(team, alice, "bob@example.com", Role.ADMIN)
    membership = services.invitation_accept(user=bob, token=token)
    assert membership.role == Role.ADMIN
    invitation = Invitation.objects.get()
    assert invitation.status == Invitation.Status.ACCEPTED
    assert invitation.accepted_by == bob
    assert invitation.decided_at is not None
    assert TeamEvent.objects.filter(team=team, action="member_joined", actor=bob).count() == 1


def test_a_used_link_cannot_be_used_again(team, alice, bob):
    _, token = invite(team, alice, "bob@example.com")
    services.invitation_accept(user=bob, token=token)
    with pytest.raises(InvitationUnusable, match="already been accepted"):
        services.invitation_accept(user=bob, token=token)
    assert Membership.objects.filter(team=team, user=bob).count() == 1


def test_only_the_addressee_can_accept(team, alice, charlie):
    _, token = invite(team, alice, "bob@example.com")
    with pytest.raises(InvitationUnusable, match=r"bob@example\.com"):
        services.invitation_accept(user=charlie, token=token)
    assert not Membership.objects.filter(team=team, user=charlie).exists()


def test_an_unverified_address_cannot_accept(team, alice):
    unverified = UserFactory(email="new@example.com", verified=False)
    _, token = invite(team, alice, "new@example.com")
    with pytest.raises(InvitationUnusable):
        services.invitation_accept(user=unverified, token=token)


def test_an_address_without_an_account_signs_up_then_accepts(team, alice, client):
    _, token = invite(team, alice, "newcomer@example.com")
    page = client.get(f"/teams/invitations/{token}/")
    assert page.status_code == 200
    assert f"/accounts/signup/?next=/teams/invitations/{token}/" in page.content.decode()
    # She signs up with that address (allauth sends a verification e-mail) and confirms it.
    response = client.post(
        "/accounts/signup/",
        {
            "email": "newcomer@example.com",
            "password1": "a long pass phrase 4 teams",
            "password2": "a long pass phrase 4 teams",
            "accept_terms": "on",
            "next": f"/teams/invitations/{token}/",
        },
    )
    assert response.status_code == 302
    verification = next(m for m in mail.outbox if m.to == ["newcomer@example.com"] and "/accounts/" in m.body)
    confirm_url = re.search(r"https?://[^\s]+/accounts/confirm-email/[^\s]+/", verification.body).group(0)
    path = confirm_url.split("testserver", 1)[-1]
    response = client.post(path)
    assert response.status_code == 302
    assert response["Location"] == f"/teams/invitations/{token}/"  # allauth kept ?next= through the verification
    assert 'value="accept"' in client.get(response["Location"]).content.decode()
    assert EmailAddress.objects.get(email="newcomer@example.com").verified
    # Back on the invitation, logged in: accept.
    response = client.post(f"/teams/invitations/{token}/", {"action": "accept"})
    assert response.status_code == 302
    assert response["Location"] == f"/teams/{team.slug}/"
    assert Membership.objects.get(team=team, user__email="newcomer@example.com").role == Role.MEMBER


def test_declining_needs_no_account(team, alice, client):
    _, token = invite(team, alice, "nobody@example.com")
    response = client.post(f"/teams/invitations/{token}/", {"action": "decline"})
    assert response.status_code == 302
    assert Invitation.objects.get().status == Invitation.Status.DECLINED
    with pytest.raises(InvitationUnusable, match="declined"):
        services.invitation_decline(token=token)
    assert TeamEvent.objects.filter(team=team, action="invitation_declined", actor=None).count() == 1


def test_a_revoked_invitation_cannot_be_accepted(team, alice, bob):
    invitation, token = invite(team, alice, "bob@example.com")
    assert services.invitation_revoke(actor=alice, invitation=invitation) is True
    assert services.invitation_revoke(actor=alice, invitation=invitation) is False  # a repeat does nothing
    with pytest.raises(InvitationUnusable, match="withdrawn"):
        services.invitation_accept(user=bob, token=token)
    assert TeamEvent.objects.filter(team=team, action="invitation_revoked").count() == 1


def test_reinviting_a_pending_address_replaces_the_old_link(team, alice, bob):
    first, old_token = invite(team, alice, "bob@example.com")
    _, new_token = invite(team, alice, "BOB@example.com", Role.ADMIN)
    first.refresh_from_db()
    assert first.status == Invitation.Status.REVOKED
    with pytest.raises(InvitationUnusable):
        services.invitation_accept(user=bob, token=old_token)
    assert services.invitation_accept(user=bob, token=new_token).role == Role.ADMIN


def test_inviting_a_member_is_a_clear_error(team, alice, bob):
    add_member(team, bob)
    with pytest.raises(AlreadyMember, match="already a member"):
        invite(team, alice, "BOB@example.com")
    assert not Invitation.objects.exists()


def test_a_bad_address_or_role_is_refused(team, alice):
    with pytest.raises(TeamInvalid):
        invite(team, alice, "not an address")
    with pytest.raises(TeamInvalid):
        invite(team, alice, "x@example.com", "emperor")


def test_only_an_owner_invites_an_owner(staffed, dave):
    with pytest.raises(TeamForbidden):
        invite(staffed, dave, "x@example.com", Role.OWNER)
    assert invite(staffed, dave, "x@example.com", Role.ADMIN)[0].role == Role.ADMIN


@pytest.mark.parametrize("who", ["bob", "erin"])
def test_members_and_billing_viewers_cannot_invite(staffed, who, request):
    with pytest.raises(TeamForbidden):
        invite(staffed, request.getfixturevalue(who), "x@example.com")


def test_an_expired_invitation_is_refused_before_and_after_the_task(team, alice, bob, settings):
    settings.TEAMS_INVITATION_TTL_H = 1
    _, token = invite(team, alice, "bob@example.com")
    Invitation.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(InvitationUnusable, match="expired"):
        services.invitation_accept(user=bob, token=token)
    assert invitations_expire_task.delay().get() == 1
    assert invitations_expire_task.delay().get() == 0  # idempotent
    assert Invitation.objects.get().status == Invitation.Status.EXPIRED
    with pytest.raises(InvitationUnusable, match="expired"):
        services.invitation_accept(user=bob, token=token)


def test_the_ttl_setting_sets_the_expiry(team, alice, settings):
    settings.TEAMS_INVITATION_TTL_H = 5
    invitation, _ = invite(team, alice, "bob@example.com")
    assert timedelta(hours=4, minutes=59) < invitation.expires_at - invitation.created_at <= timedelta(hours=5)


def test_the_task_leaves_fresh_invitations_alone(team, alice):
    invite(team, alice, "bob@example.com")
    assert services.invitations_expire() == 0
    assert Invitation.objects.get().status == Invitation.Status.PENDING


def test_the_task_is_on_the_beat_schedule(settings):
    names = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert "teams.tasks.invitations_expire_task" in names


def test_an_unknown_link_is_a_404(client, db):
    assert client.get("/teams/invitations/nonsense/").status_code == 404
