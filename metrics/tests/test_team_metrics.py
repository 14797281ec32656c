"""A team instance's GPU charts (issue #15): any member who may see it; not a billing viewer, a former
member or a stranger."""

from __future__ import annotations

from accounts.tests.factories import UserFactory
from instances.catalogue import catalogue_seed
from instances.tests.conftest import fund, running
from teams.models import Membership, Role
from teams.services import team_create
from teams.tests.helpers import in_team


def test_who_sees_a_team_instances_metrics(alice, bob, charlie, db):
    catalogue_seed()
    team = team_create(user=alice, name="Lab")
    fund(team.account, 1_000_000)
    erin = UserFactory(email="erin@example.com")
    Membership.objects.create(team=team, user=bob, role=Role.MEMBER)
    Membership.objects.create(team=team, user=erin, role=Role.BILLING)
    instance = running(team.account)
    url = f"/api/v1/instances/{instance.pk}/metrics/"
    assert in_team(alice, team).get(url).status_code == 200
    member = in_team(bob, team)
    assert member.get(url).status_code == 200
    assert in_team(erin, team).get(url).status_code == 404
    assert in_team(charlie, team).get(url).status_code == 404
    Membership.objects.filter(team=team, user=bob).delete()
    assert member.get(url).status_code == 404
