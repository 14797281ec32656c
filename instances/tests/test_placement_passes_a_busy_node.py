"""A launch does not queue behind another that is taking cards on the best-fitting node: it takes the
next node that fits, and waits only when every node that fits is being taken."""

import threading

import pytest
from django.db import connection, transaction

from instances.models import GpuModel, Region
from instances.services import nodes_sync
from instances.services.placement import _gpus_reserve
from instances.tests.conftest import launch

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_launch_takes_the_next_node_while_another_holds_the_best_one(rich_alice, bob):
    from instances.tests.conftest import fund

    fund(bob, 1_000_000)
    nodes_sync(alias="default")  # cn-north-1 has two 8-card A800 nodes
    holding, release = threading.Event(), threading.Event()
    held = []

    def other_launch() -> None:
        try:
            with transaction.atomic():  # taking cards, not yet committed: its node row stays locked
                region, gpu = Region.objects.get(slug="cn-north-1"), GpuModel.objects.get(slug="a800-80g")
                held.append(_gpus_reserve(region=region, gpu_model=gpu, count=1).name)
                holding.set()
                release.wait(timeout=30)
        finally:
            connection.close()

    thread = threading.Thread(target=other_launch)
    thread.start()
    try:
        assert holding.wait(timeout=30)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")  # waiting on the held row would fail the launch
        instance = launch(rich_alice, gpu="a800-80g")
    finally:
        release.set()
        thread.join(timeout=30)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")
    assert held and instance.node.name != held[0]
    assert instance.node.free_cards == 7
