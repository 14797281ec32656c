"""A two-node instance launched through the console on the real Slurm cluster: one job on two nodes,
the instance RUNNING, its cards counted on the two nodes Slurm chose (the console follows Slurm's
placement), and every card given back by a stop and a release."""

from __future__ import annotations

import pytest

from instances.models import Instance, Node
from instances.services import instance_release, instance_stop, instance_sync
from instances.tests.conftest import committed, launch
from providers.local.tests.local_helpers import wait_running, wait_until
from providers.slurm.tests.slurm_helpers import PREFIX

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]

S = Instance.Status


def _expand(nodelist: str) -> set[str]:
    import subprocess

    from providers.slurm.tests.slurm_helpers import SLURM_CONF

    out = subprocess.run(
        ["scontrol", "show", "hostnames", nodelist],
        capture_output=True,
        text=True,
        check=True,
        env={"SLURM_CONF": str(SLURM_CONF), "PATH": "/usr/bin:/bin:/usr/local/bin"},
    )
    return set(out.stdout.split())


def test_a_two_node_instance_is_one_job_on_two_nodes_and_gives_every_card_back(on_slurm, slurm_cluster, rich_alice):
    on_slurm(services=())
    with committed():
        instance = launch(rich_alice, gpu="h200", count=2, nodes=2, region="slurm-local", name="pair")
    instance.refresh_from_db()
    assert instance.node_count == 2 and len(set(instance.node_names)) == 2
    wait_running(instance, timeout=90)
    instance.refresh_from_db()
    assert instance.status == S.RUNNING

    job = slurm_cluster.job(instance.backend_state["job_id"])
    assert job["name"] == f"{PREFIX}{instance.key}"
    assert job["node_count"] == 2 and job["tres_per_node"] == "gres:gpu:h200:2"
    on_nodes = _expand(job["nodes"])
    assert len(on_nodes) == 2
    # The console follows where Slurm ran it: its cards are counted on those two nodes, no others.
    assert set(instance.node_names) == on_nodes
    free = dict(Node.objects.filter(backend_alias="slurm").values_list("name", "free_cards"))
    total = dict(Node.objects.filter(backend_alias="slurm").values_list("name", "total_cards"))
    assert {name: total[name] - free[name] for name in free} == {n: (2 if n in on_nodes else 0) for n in free}

    with committed():
        instance_stop(instance=instance)

    def stopped() -> bool:
        instance_sync(instance_id=instance.pk)
        instance.refresh_from_db()
        return instance.status == S.STOPPED

    wait_until(stopped, timeout=60, what="the cluster to stop")
    assert slurm_cluster.active(f"{PREFIX}{instance.key}") == []
    assert all(n.free_cards == n.total_cards for n in Node.objects.filter(backend_alias="slurm"))

    with committed():
        instance_release(instance=instance)
    instance.refresh_from_db()
    assert instance.status == S.RELEASED
