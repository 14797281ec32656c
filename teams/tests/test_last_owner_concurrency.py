"""Two owners leaving at the same moment: the team's row lock lets one go and keeps the other."""

from __future__ import annotations

import pytest

from core.testing import race
from teams import services
from teams.errors import LastOwner
from teams.models import Membership, Role
from teams.tests.conftest import add_member

pytestmark = pytest.mark.django_db(transaction=True)


def test_one_of_two_owners_leaving_at_once_stays(alice, bob):
    team = services.team_create(user=alice, name="Lab")
    add_member(team, bob, Role.OWNER)
    users = (alice, bob)
    won, refused, errors = race(
        lambda k: services.membership_leave(user=users[k], team=team), threads=2, refusals=(LastOwner,)
    )
    assert errors == []
    outcomes = ["left"] * len(won) + ["refused"] * len(refused)
    assert sorted(outcomes) == ["left", "refused"]
    assert Membership.objects.filter(team=team, role=Role.OWNER).count() == 1
