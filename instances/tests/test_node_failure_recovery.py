"""A node fails under running instances whose disks survive it (the simulated cloud with DISK_FOLLOWS):
they restart on healthy nodes with the same identity, clusters as a whole, and the downtime is not billed.
Where no healthy node has room, they wait (PREEMPTED) and restart by themselves when capacity returns;
where the disk cannot follow, they are lost as before (``test_node_health``)."""

import pytest

from billing.models import Meter
from instances.models import Instance, Node
from instances.reconciler import instances_reconcile
from instances.skus import gpu_meter_ref
from instances.tests.conftest import backends, committed, running
from providers import get_backend
from providers.simulated.models import SimulatedNode

S = Instance.Status


@pytest.fixture
def disks_follow(settings):
    settings.PROVISIONING_BACKENDS = backends(DISK_FOLLOWS=True)
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64


def reconcile():
    with committed():
        return instances_reconcile()


def test_a_lost_node_restarts_its_instance_elsewhere_with_the_same_identity_unbilled_in_between(
    rich_alice, disks_follow
):
    instance = running(rich_alice, count=2)
    old = instance.node.name
    get_backend("default").node_lose(name=old)
    reconcile()
    instance.refresh_from_db()
    assert instance.status == S.RUNNING
    assert instance.node.name != old and instance.node.is_healthy
    machines = [m for m in get_backend("default").machines() if m.key == instance.key]
    assert len(machines) == 1 and machines[0].node == instance.node.name  # the same machine, moved
    reasons = [e.reason_text for e in instance.events.order_by("created_at", "id")]
    assert f"Node {old} failed: restarting on {instance.node.name} with the same disk and addresses" in reasons
    # Two meters: closed at the failure's detection, opened again when it ran; nothing in between.
    first, second = Meter.objects.filter(ref=gpu_meter_ref(instance.pk)).order_by("started_at")
    moved = instance.events.get(old=S.RUNNING, new=S.STARTING).created_at
    back = instance.events.filter(new=S.RUNNING).order_by("-created_at").first().created_at
    assert first.stopped_at == moved and second.started_at == back and second.stopped_at is None
    # Cards: two held on the new node; the failed node's came back to it.
    assert Node.objects.get(name=instance.node.name).free_cards == 6
    assert Node.objects.get(name=old).free_cards == 8


def test_a_cluster_moves_as_a_whole_when_one_of_its_nodes_fails(rich_alice, settings):
    fleet = [{"region": "cn-north-1", "gpu": "a800-80g", "nodes": 3, "cards": 8}]
    settings.PROVISIONING_BACKENDS = backends(DISK_FOLLOWS=True, FLEET=fleet)
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    cluster = running(rich_alice, count=8, nodes=2)
    assert cluster.status == S.RUNNING, cluster.status_reason_text
    failed = cluster.extra_nodes[0]
    get_backend("default").node_lose(name=failed)
    reconcile()
    cluster.refresh_from_db()
    assert cluster.status == S.RUNNING
    assert failed not in cluster.node_names and len(set(cluster.node_names)) == 2
    free = dict(Node.objects.values_list("name", "free_cards"))
    assert [free[name] for name in cluster.node_names] == [0, 0]
    assert free[failed] == 8
    spread = [m for m in get_backend("default").machines() if m.key == cluster.key]
    assert spread[0].cards == 16


def test_without_room_it_waits_and_restarts_by_itself_when_the_node_comes_back(rich_alice, disks_follow):
    instance = running(rich_alice, gpu="h800", count=8)  # the only H800 node
    node = instance.node.name
    get_backend("default").node_lose(name=node)
    reconcile()
    instance.refresh_from_db()
    assert instance.status == S.PREEMPTED
    assert "failed; its disk is kept" in instance.status_reason_text
    assert not Meter.objects.filter(ref=gpu_meter_ref(instance.pk), stopped_at__isnull=True).exists()
    assert Node.objects.get(name=node).free_cards == 8  # nothing held on the failed node

    SimulatedNode.objects.filter(name=node).update(is_lost=False)
    reconcile()
    instance.refresh_from_db()
    assert instance.status == S.RUNNING and instance.node.name == node


def test_a_cluster_that_cannot_move_whole_holds_no_card_anywhere(rich_alice, disks_follow):
    cluster = running(rich_alice, count=8, nodes=2)  # both A800 nodes of cn-north-1
    get_backend("default").node_lose(name=cluster.node.name)
    reconcile()
    cluster.refresh_from_db()
    assert cluster.status == S.PREEMPTED
    assert cluster.node_id is None and cluster.extra_nodes == []
    a800 = Node.objects.filter(gpu_model__slug="a800-80g", region__slug="cn-north-1")
    assert [n.free_cards for n in a800] == [8, 8]  # never half-placed


def test_where_the_disk_cannot_follow_the_instance_is_lost_as_before(rich_alice):
    instance = running(rich_alice, count=1)
    get_backend("default").node_lose(name=instance.node.name)
    reconcile()
    instance.refresh_from_db()
    assert instance.status == S.LOST


def test_a_move_whose_start_task_was_lost_is_sent_again_not_marked_lost(rich_alice, disks_follow, monkeypatch):
    import instances.services.sync as services  # where the recovery enqueues the start

    instance = running(rich_alice, count=1)
    get_backend("default").node_lose(name=instance.node.name)
    real = services._enqueue
    monkeypatch.setattr(services, "_enqueue", lambda task, pk: None)  # the start task is lost
    reconcile()
    instance.refresh_from_db()
    assert instance.status == S.STARTING
    reconcile()  # the machine still reads as gone: sent again (lost here too), not marked lost
    instance.refresh_from_db()
    assert instance.status == S.STARTING
    monkeypatch.setattr(services, "_enqueue", real)
    reconcile()
    instance.refresh_from_db()
    assert instance.status == S.RUNNING
