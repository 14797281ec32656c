"""Two owners leaving at the same moment: the team's row lock lets one go and keeps the other."""

from __future__ import annotations

import threading

import pytest
from django.db import close_old_connections

from teams import services
from teams.errors import LastOwner
from teams.models import Membership, Role
from teams.tests.conftest import add_member

pytestmark = pytest.mark.django_db(transaction=True)


def test_one_of_two_owners_leaving_at_once_stays(alice, bob):
    team = services.team_create(user=alice, name="Lab")
    add_member(team, bob, Role.OWNER)
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def leave(user) -> None:
        try:
            barrier.wait()
            services.membership_leave(user=user, team=team)
            outcomes.append("left")
        except LastOwner:
            outcomes.append("refused")
        finally:
            close_old_connections()

    threads = [threading.Thread(target=leave, args=(u,)) for u in (alice, bob)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["left", "refused"]
    assert Membership.objects.filter(team=team, role=Role.OWNER).count() == 1
