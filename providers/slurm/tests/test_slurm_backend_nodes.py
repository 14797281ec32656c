"""The Slurm backend's nodes are Slurm's: their GPU model from the GRES type, their cards, the cards
Slurm has free, their health. A node whose slurmd stops is noticed by the reconciler (unhealthy, no
new placements), and an instance whose job Slurm then kills with the node is marked lost."""

from __future__ import annotations

import pytest

from instances.models import Instance, Node
from instances.reconciler import instances_reconcile
from instances.services import nodes_sync
from instances.tests.conftest import committed, launch
from providers.local.tests.local_helpers import wait_running, wait_until
from providers.slurm.tests.slurm_helpers import NODES

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]


def test_nodes_come_from_slurm_with_their_gpus_and_free_cards(on_slurm, slurm_cluster):
    backend = on_slurm(services=(), GPU_TYPES={"h200": "h200"})
    job = slurm_cluster.sbatch("--nodes=1", "--gres=gpu:h200:3", "--wrap=sleep 300", name="three-cards")
    wait_until(lambda: slurm_cluster.job(job)["job_state"] == "RUNNING", timeout=20, what="the job to run")
    busy = slurm_cluster.job(job)["nodes"]
    infos = {n.name: n for n in backend.nodes()}
    assert set(infos) == set(NODES)
    assert all(
        n.gpu_model == "h200" and n.cards == 8 and n.healthy and n.region == "slurm-local" for n in infos.values()
    )
    assert infos[busy].free_cards == 5
    assert nodes_sync(alias="slurm") == 3
    assert set(Node.objects.filter(backend_alias="slurm", is_healthy=True).values_list("name", flat=True)) == set(NODES)
    # Slurm's own count reaches the fleet page: the job was not the console's, so its reservations
    # still say 8 free, and the provider says 5.
    node = Node.objects.get(backend_alias="slurm", name=busy)
    assert (node.free_cards, node.provider_free_cards) == (8, 5)
    from django.test import Client

    from accounts.tests.factories import UserFactory

    staff = Client()
    staff.force_login(UserFactory(email="ops@example.com", is_staff=True))
    assert "5 by the provider" in staff.get("/staff/fleet/").content.decode()


def test_a_stopped_slurmd_is_noticed_and_the_instance_it_took_down_moves_off_it(on_slurm, slurm_cluster, rich_alice):
    on_slurm(services=(), PIN_NODE=True)
    nodes_sync(alias="slurm")
    # The console places on gpu03 (the only node it sees free), and Slurm runs it there (PIN_NODE).
    Node.objects.filter(backend_alias="slurm").exclude(name="gpu03").update(free_cards=0)
    with committed():
        instance = launch(rich_alice, gpu="h200", count=1, region="slurm-local", name="doomed")
    wait_running(instance)
    assert instance.backend_state["node"] == "gpu03"

    slurm_cluster.node_stop("gpu03")
    try:

        def node_unhealthy():
            instances_reconcile()
            return not Node.objects.get(backend_alias="slurm", name="gpu03").is_healthy

        wait_until(node_unhealthy, timeout=20, interval=0.5, what="the reconciler to notice gpu03")
        assert Node.objects.filter(backend_alias="slurm", is_healthy=True).count() == 2

        # Its disk is on the shared filesystem (disk_follows_node_loss): not lost, but moved off gpu03,
        # to a healthy node or (the console sees no free card elsewhere here) waiting for one.
        def moved():
            instances_reconcile()
            instance.refresh_from_db()
            if instance.status == Instance.Status.RUNNING:
                return instance.node is not None and instance.node.name != "gpu03"
            return instance.status in (Instance.Status.STARTING, Instance.Status.PREEMPTED)

        wait_until(moved, timeout=30, interval=0.5, what=f"the instance to move (it is {instance.status})")
        assert not instance.events.filter(new="lost").exists()
        assert any("gpu03" in e.reason_text and "failed" in e.reason_text for e in instance.events.all())
        assert instance.node is None or instance.node.name != "gpu03"
        assert Node.objects.get(backend_alias="slurm", name="gpu03").free_cards == 8  # its card went back
    finally:
        slurm_cluster.node_start("gpu03")
        # Back in service (idle, or already running the instance again: it waited for a free card).
        wait_until(
            lambda: slurm_cluster.node_state("gpu03") in ("idle", "mix", "alloc"), timeout=60, what="gpu03 to come back"
        )
    instances_reconcile()
    assert Node.objects.get(backend_alias="slurm", name="gpu03").is_healthy
