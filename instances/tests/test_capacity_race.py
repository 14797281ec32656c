"""100 concurrent launches for the last 8 free cards, on PostgreSQL, with real threads.

The launches come from 50 threads (two each, back to back) so the test fits in PostgreSQL's default
100 connections alongside other test runs; 50 transactions still race for the same node row at once.
"""

import pytest
from django.db import connection

from core.testing import race
from instances.catalogue import catalogue_seed
from instances.errors import NoCapacity
from instances.models import Instance, Node
from instances.services import nodes_sync
from instances.tests.conftest import fund, launch
from providers import get_backend

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_hundred_concurrent_launches_never_oversubscribe_a_node(settings, django_user_model):
    if connection.vendor != "postgresql":
        pytest.skip("row locks are the point: PostgreSQL only")
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    catalogue_seed()
    users = []
    for n in range(20):
        user = django_user_model.objects.create_user(email=f"racer{n}@example.com", password="x" * 12)
        fund(user, 1_000_000)
        users.append(user)
    nodes_sync(alias="default")  # the node table exists before the race, as in production

    # 50 threads, two launches each, back to back.
    won, refused, errors = race(
        lambda k: launch(users[k % 20], gpu="h800", count=1).pk, threads=50, each=2, refusals=(NoCapacity,)
    )

    assert errors == []
    assert len(won) == 8
    assert len(refused) == 92
    node = Node.objects.get(gpu_model__slug="h800")
    assert node.free_cards == 0
    held = sum(Instance.objects.filter(node=node).values_list("gpu_count", flat=True))
    assert held == node.total_cards
    machines = [m for m in get_backend("default").machines() if m.node == node.name]
    assert len(machines) == 8  # the provider agrees: every winner got a machine, nobody a second
