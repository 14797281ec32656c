"""What the apps' tests of a team's context share: a team with one person per role, and a test client
acting in a team (the session's acting context, as the header's switcher sets it)."""

from __future__ import annotations

from django.test import Client

from accounts.tests.factories import UserFactory
from instances.tests.conftest import fund
from teams.context import SESSION_KEY
from teams.models import Membership, Role, Team
from teams.services import team_create


def lab_with_roles(alice, bob, *, balance_fen: int = 1_000_000) -> Team:
    """ "Lab": alice owns it, dave is an admin, bob a member, erin a billing viewer (``team.people``);
    its wallet holds ``balance_fen``."""
    team = team_create(user=alice, name="Lab")
    fund(team.account, balance_fen)
    dave = UserFactory(email="dave@example.com")
    erin = UserFactory(email="erin@example.com")
    Membership.objects.create(team=team, user=bob, role=Role.MEMBER)
    Membership.objects.create(team=team, user=dave, role=Role.ADMIN)
    Membership.objects.create(team=team, user=erin, role=Role.BILLING)
    team.people = {"alice": alice, "bob": bob, "dave": dave, "erin": erin}
    return team


def in_team(user, team) -> Client:
    """A client logged in as ``user``, acting in ``team``."""
    client = Client()
    client.force_login(user)
    session = client.session
    session[SESSION_KEY] = team.pk
    session.save()
    return client
