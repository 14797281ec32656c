"""Roles, limits, removing and leaving, and the last-owner rules."""

from __future__ import annotations

import pytest

from teams import services
from teams.errors import LastOwner, TeamForbidden, TeamInvalid
from teams.models import Membership, Role, TeamEvent
from teams.tests.conftest import add_member, membership


def test_an_admin_changes_a_members_role(staffed, dave, bob):
    services.membership_role_change(actor=dave, membership=membership(staffed, bob), role=Role.BILLING)
    assert membership(staffed, bob).role == Role.BILLING
    event = TeamEvent.objects.get(team=staffed, action="role_changed")
    assert (event.actor, event.target, event.details) == (dave, "bob@example.com", {"old": "member", "new": "billing"})


@pytest.mark.parametrize("who", ["bob", "erin"])
def test_a_member_or_billing_viewer_cannot_change_roles(staffed, who, request, dave):
    with pytest.raises(TeamForbidden):
        services.membership_role_change(
            actor=request.getfixturevalue(who), membership=membership(staffed, dave), role=Role.MEMBER
        )
    assert membership(staffed, dave).role == Role.ADMIN


def test_only_an_owner_makes_or_unmakes_owners(staffed, alice, dave, bob):
    with pytest.raises(TeamForbidden):
        services.membership_role_change(actor=dave, membership=membership(staffed, bob), role=Role.OWNER)
    with pytest.raises(TeamForbidden):
        services.membership_role_change(actor=dave, membership=membership(staffed, alice), role=Role.ADMIN)
    services.membership_role_change(actor=alice, membership=membership(staffed, bob), role=Role.OWNER)
    assert membership(staffed, bob).role == Role.OWNER


def test_the_last_owner_cannot_be_demoted(team, alice):
    with pytest.raises(LastOwner):
        services.membership_role_change(actor=alice, membership=membership(team, alice), role=Role.ADMIN)
    assert membership(team, alice).role == Role.OWNER


def test_an_owner_steps_down_once_there_is_another(team, alice, bob):
    add_member(team, bob, Role.OWNER)
    services.membership_role_change(actor=alice, membership=membership(team, alice), role=Role.MEMBER)
    assert membership(team, alice).role == Role.MEMBER
    with pytest.raises(LastOwner):
        services.membership_role_change(actor=bob, membership=membership(team, bob), role=Role.MEMBER)


def test_the_last_owner_cannot_leave(team, alice):
    with pytest.raises(LastOwner):
        services.membership_leave(user=alice, team=team)
    assert membership(team, alice)


def test_two_owners_cannot_both_leave(team, alice, bob):
    add_member(team, bob, Role.OWNER)
    services.membership_leave(user=alice, team=team)
    with pytest.raises(LastOwner):
        services.membership_leave(user=bob, team=team)
    assert list(team.memberships.values_list("user__email", flat=True)) == ["bob@example.com"]


def test_a_member_leaves(staffed, bob):
    services.membership_leave(user=bob, team=staffed)
    assert not Membership.objects.filter(team=staffed, user=bob).exists()
    assert TeamEvent.objects.filter(team=staffed, action="member_left", actor=bob).count() == 1


def test_an_admin_removes_a_member_but_not_an_owner(staffed, alice, dave, bob):
    services.membership_remove(actor=dave, membership=membership(staffed, bob))
    assert not Membership.objects.filter(team=staffed, user=bob).exists()
    assert TeamEvent.objects.filter(team=staffed, action="member_removed", target="bob@example.com").count() == 1
    with pytest.raises(TeamForbidden):
        services.membership_remove(actor=dave, membership=membership(staffed, alice))


def test_a_member_cannot_remove_anyone(staffed, bob, erin):
    with pytest.raises(TeamForbidden):
        services.membership_remove(actor=bob, membership=membership(staffed, erin))


def test_removing_oneself_is_leaving(staffed, dave):
    services.membership_remove(actor=dave, membership=membership(staffed, dave))
    assert TeamEvent.objects.filter(team=staffed, action="member_left", actor=dave).count() == 1


def test_an_admin_sets_and_lifts_limits(staffed, dave, bob):
    services.membership_limits_set(actor=dave, membership=membership(staffed, bob), spend_limit_fen=50_000, gpu_limit=2)
    assert (membership(staffed, bob).spend_limit_fen, membership(staffed, bob).gpu_limit) == (50_000, 2)
    services.membership_limits_set(actor=dave, membership=membership(staffed, bob), spend_limit_fen=None, gpu_limit=2)
    assert membership(staffed, bob).spend_limit_fen is None
    events = TeamEvent.objects.filter(team=staffed, action="limits_changed").order_by("id")
    assert [e.details["new"] for e in events] == [
        {"spend_limit_fen": 50_000, "gpu_limit": 2},
        {"spend_limit_fen": None, "gpu_limit": 2},
    ]
    # The same limits again change nothing and write nothing.
    services.membership_limits_set(actor=dave, membership=membership(staffed, bob), spend_limit_fen=None, gpu_limit=2)
    assert events.count() == 2


def test_limits_are_not_negative_and_members_cannot_set_them(staffed, dave, bob):
    with pytest.raises(TeamInvalid):
        services.membership_limits_set(
            actor=dave, membership=membership(staffed, bob), spend_limit_fen=-1, gpu_limit=None
        )
    with pytest.raises(TeamForbidden):
        services.membership_limits_set(actor=bob, membership=membership(staffed, bob), spend_limit_fen=1, gpu_limit=1)


def test_renaming_is_for_owners_and_admins(staffed, dave, bob):
    services.team_rename(actor=dave, team=staffed, name="Vision Lab")
    staffed.refresh_from_db()
    staffed.account.refresh_from_db()
    assert (staffed.name, staffed.account.display_name, staffed.slug) == ("Vision Lab", "Vision Lab", "lab")
    assert TeamEvent.objects.get(team=staffed, action="team_renamed").details == {"old": "Lab", "new": "Vision Lab"}
    with pytest.raises(TeamForbidden):
        services.team_rename(actor=bob, team=staffed, name="Mine")
