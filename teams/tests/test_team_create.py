from __future__ import annotations

import pytest

from billing.selectors import balance_get
from billing.services import TrialUnavailable, trial_claim
from teams import services
from teams.errors import TeamInvalid
from teams.models import Membership, Role, Team, TeamEvent


def test_the_creator_becomes_owner_of_a_new_account(alice):
    team = services.team_create(user=alice, name="Vision Lab")
    assert team.slug == "vision-lab"
    assert team.account.email.endswith("@teams.invalid")
    assert not team.account.has_usable_password()
    assert team.account.display_name == "Vision Lab"
    assert Membership.objects.get(team=team).user == alice
    assert Membership.objects.get(team=team).role == Role.OWNER
    assert TeamEvent.objects.filter(team=team, action="team_created", actor=alice).count() == 1


def test_the_team_account_gets_no_trial_credit(alice, settings):
    settings.BILLING_TRIAL_CREDIT_FEN = 1000
    team = services.team_create(user=alice, name="Lab")
    assert balance_get(user=team.account).total == 0
    with pytest.raises(TrialUnavailable):
        trial_claim(user=team.account)


def test_slugs_stay_unique_and_avoid_the_reserved_paths(alice):
    first = services.team_create(user=alice, name="Lab")
    second = services.team_create(user=alice, name="Lab")
    chinese = services.team_create(user=alice, name="视觉实验室")
    reserved = services.team_create(user=alice, name="Switch")
    assert first.slug == "lab"
    assert second.slug == "lab-2"
    assert chinese.slug == "team"
    assert reserved.slug == "switch-team"
    assert Team.objects.count() == 4


@pytest.mark.parametrize("name", ["", "   ", "x" * 81])
def test_it_refuses_a_bad_name(alice, name):
    with pytest.raises(TeamInvalid):
        services.team_create(user=alice, name=name)
    assert not Team.objects.exists()
