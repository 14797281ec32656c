"""The audit log: append-only, written by every change, readable by owners and admins only."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.tests.factories import UserFactory
from billing.models import AppendOnlyError
from teams import services
from teams.models import Role, TeamEvent
from teams.tests.conftest import add_member


def test_events_cannot_be_edited_or_deleted(team):
    event = TeamEvent.objects.get(team=team)
    event.target = "rewritten"
    with pytest.raises(AppendOnlyError):
        event.save()
    with pytest.raises(AppendOnlyError):
        event.delete()
    with pytest.raises(AppendOnlyError):
        TeamEvent.objects.filter(team=team).update(target="x")
    with pytest.raises(AppendOnlyError):
        TeamEvent.objects.filter(team=team).delete()


def test_a_whole_story_is_in_the_log(team, alice, bob):
    _, token = services.invitation_create(
        actor=alice, team=team, email="bob@example.com", role="member", site_url="http://t/"
    )
    membership = services.invitation_accept(user=bob, token=token)
    services.membership_role_change(actor=alice, membership=membership, role=Role.ADMIN)
    services.membership_limits_set(actor=alice, membership=membership, spend_limit_fen=100, gpu_limit=1)
    services.team_rename(actor=alice, team=team, name="Lab 2")
    services.membership_leave(user=bob, team=team)
    actions = list(TeamEvent.objects.filter(team=team).order_by("id").values_list("action", "actor__email"))
    assert actions == [
        ("team_created", "alice@example.com"),
        ("member_invited", "alice@example.com"),
        ("member_joined", "bob@example.com"),
        ("role_changed", "alice@example.com"),
        ("limits_changed", "alice@example.com"),
        ("team_renamed", "alice@example.com"),
        ("member_left", "bob@example.com"),
    ]


def test_other_apps_record_events_for_team_accounts_only(team, alice):
    services.team_event_record(account=team.account, actor=alice, action="instance_launched", target="train-1")
    services.team_event_record(account=alice, actor=alice, action="instance_launched", target="mine")
    assert list(TeamEvent.objects.filter(action="instance_launched").values_list("target", flat=True)) == ["train-1"]


def test_the_team_page_costs_the_same_for_many_members(alice_client, team):
    add_member(team, UserFactory())
    with CaptureQueriesContext(connection) as few:
        alice_client.get("/teams/lab/")
    for _ in range(10):
        add_member(team, UserFactory())
    with CaptureQueriesContext(connection) as many:
        alice_client.get("/teams/lab/")
    assert len(many.captured_queries) == len(few.captured_queries)
