from __future__ import annotations

import pytest

from instances.catalogue import catalogue_seed
from instances.tests.conftest import backends, fund, launch
from teams import services
from teams.errors import TeamForbidden, TeamNotEmpty
from teams.models import Invitation, Membership, Team, TeamEvent
from teams.selectors import membership_get


def test_an_owner_deletes_an_empty_team(staffed, alice, bob):
    services.invitation_create(actor=alice, team=staffed, email="x@example.com", role="member", site_url="http://t/")
    services.team_delete(actor=alice, team=staffed)
    team = Team.objects.get(pk=staffed.pk)
    assert team.deleted_at is not None
    assert team.slug != "lab"
    assert not Membership.objects.filter(team=team).exists()
    assert Invitation.objects.get().status == Invitation.Status.REVOKED
    team.account.refresh_from_db()
    assert not team.account.is_active
    assert TeamEvent.objects.filter(team=team, action="team_deleted", actor=alice).count() == 1
    assert membership_get(user=bob, slug="lab") is None
    # The name and slug are free again.
    assert services.team_create(user=bob, name="Lab").slug == "lab"


@pytest.mark.parametrize("who", ["dave", "bob", "erin"])
def test_only_an_owner_deletes(staffed, who, request):
    with pytest.raises(TeamForbidden):
        services.team_delete(actor=request.getfixturevalue(who), team=staffed)
    assert Team.objects.get(pk=staffed.pk).deleted_at is None


def test_a_team_with_money_is_not_deleted(team, alice):
    fund(team.account, 100)
    with pytest.raises(TeamNotEmpty, match="balance"):
        services.team_delete(actor=alice, team=team)
    assert Team.objects.get(pk=team.pk).deleted_at is None


def test_a_team_with_an_instance_is_not_deleted(team, alice, settings):
    settings.PROVISIONING_BACKENDS = backends()
    catalogue_seed()
    fund(team.account, 1_000_000)
    launch(team.account)
    with pytest.raises(TeamNotEmpty, match=r"instances \(1\)"):
        services.team_delete(actor=alice, team=team)
