"""Resizes at once, on PostgreSQL with real threads: two clusters growing for the last nodes never
share one (all or nothing: one grows, the other is refused and takes nothing), and the same resize
asked twice at once happens once."""

import pytest
from django.db import connection

from billing.models import Meter
from core.testing import race
from instances.capacity.resize import instance_resize
from instances.catalogue import catalogue_seed
from instances.errors import NoCapacity
from instances.models import Instance, Node
from instances.services import nodes_sync
from instances.skus import gpu_meter_ref
from instances.tests.conftest import backends, fund, launch, running

pytestmark = pytest.mark.django_db(transaction=True)
FLEET = [{"region": "cn-north-1", "gpu": "a800-80g", "nodes": 11, "cards": 8}]


def test_two_clusters_growing_for_the_last_nodes_never_share_one(settings, django_user_model):
    if connection.vendor != "postgresql":
        pytest.skip("row locks are the point: PostgreSQL only")
    settings.PROVISIONING_BACKENDS = backends(FLEET=FLEET, BLOCK_NODES=4)
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 200
    catalogue_seed()
    nodes_sync(alias="default")
    owner = django_user_model.objects.create_user(email="grower@example.com", password="x" * 12)
    fund(owner, 10_000_000)
    first, second = running(owner, count=8, nodes=2), running(owner, count=8, nodes=2)
    launch(owner, count=8, nodes=4)  # 11 - 2 - 2 - 4: three nodes left, room for one cluster to grow by two
    asks = [first, first, second, second]  # each asked twice at once (a double click)
    grown, refusals, errors = race(
        lambda k: instance_resize(instance=asks[k], node_count=4).pk, threads=len(asks), refusals=(NoCapacity,)
    )
    refused = [asks[k].pk for k, _exc in refusals]

    assert errors == []
    sizes = dict(Instance.objects.filter(pk__in=[first.pk, second.pk]).values_list("pk", "node_count"))
    assert sorted(sizes.values()) == [2, 4]  # one grew, the other took nothing
    winner = next(pk for pk, n in sizes.items() if n == 4)
    assert set(grown) == {winner} and set(refused) == {pk for pk in sizes if pk != winner}
    # One resize, however often it was asked: one closed meter and one open one.
    assert Meter.objects.filter(ref=gpu_meter_ref(winner)).count() == 2
    held = sum(i.total_gpus for i in Instance.objects.filter(status=Instance.Status.RUNNING))
    held += sum(i.total_gpus for i in Instance.objects.filter(status=Instance.Status.PROVISIONING))
    assert sum(Node.objects.values_list("free_cards", flat=True)) == 11 * 8 - held
