"""20 concurrent launches by team members near their card limits, on PostgreSQL with real threads:
the per-(team, member) lock, taken after the quota's, lets no member past their limit. The launches
mix two GPU models, whose quota locks differ, so without the member's lock they would race (they do:
this test fails with it taken out)."""

from __future__ import annotations

import pytest
from django.db import connection

from accounts.tests.factories import UserFactory
from core.testing import race
from instances.catalogue import catalogue_seed
from instances.errors import MemberLimitReached
from instances.models import Instance
from instances.services import nodes_sync
from instances.tests.conftest import fund, launch
from teams.models import Membership, Role
from teams.services import team_create

pytestmark = pytest.mark.django_db(transaction=True)


def test_twenty_parallel_launches_never_exceed_a_members_card_limit(settings):
    if connection.vendor != "postgresql":
        pytest.skip("advisory locks are the point: PostgreSQL only")
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    catalogue_seed()
    nodes_sync(alias="default")
    owner = UserFactory(email="owner@example.com")
    team = team_create(user=owner, name="Racers")
    fund(team.account, 10_000_000)
    members = []
    for n in range(4):
        person = UserFactory(email=f"racer{n}@example.com")
        Membership.objects.create(team=team, user=person, role=Role.MEMBER, gpu_limit=3)
        launch(team.account, actor=person, count=1)  # each already holds one card: two more fit
        members.append(person)

    def work(k: int) -> object:
        # Two models: the quota's lock is per model, so only the member's own lock serialises these.
        gpu = "h800" if (k // 4) % 2 else "a800-80g"
        return launch(team.account, actor=members[k % 4], count=1, gpu=gpu).pk

    won, refused, errors = race(work, threads=20, refusals=(MemberLimitReached,))

    assert errors == []
    assert len(won) == 8 and len(refused) == 12
    for person in members:
        held = Instance.objects.filter(owner=team.account, created_by=person, status__in=Instance.HOLDING_GPUS)
        assert sum(held.values_list("gpu_count", flat=True)) == 3
