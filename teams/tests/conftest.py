"""Teams' personas: alice owns "Lab"; bob is a member; dave an admin; erin a billing viewer; charlie is
a stranger."""

from __future__ import annotations

import pytest

from accounts.tests.factories import UserFactory
from teams import services
from teams.models import Membership, Role


def add_member(team, user, role=Role.MEMBER) -> Membership:
    """Put ``user`` in ``team`` directly (tests of other behaviours need not go through invitations)."""
    return Membership.objects.create(team=team, user=user, role=role)


@pytest.fixture
def team(alice):
    return services.team_create(user=alice, name="Lab")


@pytest.fixture
def dave(db):
    return UserFactory(email="dave@example.com", display_name="Dave")


@pytest.fixture
def erin(db):
    return UserFactory(email="erin@example.com", display_name="Erin")


@pytest.fixture
def staffed(team, bob, dave, erin):
    """The team with bob (member), dave (admin) and erin (billing viewer)."""
    add_member(team, bob, Role.MEMBER)
    add_member(team, dave, Role.ADMIN)
    add_member(team, erin, Role.BILLING)
    return team


def membership(team, user) -> Membership:
    return Membership.objects.get(team=team, user=user)
