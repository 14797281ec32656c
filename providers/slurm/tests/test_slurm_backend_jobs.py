"""The Slurm backend's two ways of talking to Slurm (slurmrestd with JWT, and the command-line tools)
submit, poll and cancel the same jobs on the local cluster; a cluster of two machines gets two nodes;
a report pointing outside the job's allocation is refused;
while the cluster is full the instance waits with its place in the queue and Slurm's reason, and the
instance page says so."""

from __future__ import annotations

import pytest
from django.test import Client

from instances.services import instance_release, instance_sync
from instances.tests.conftest import committed, launch
from providers import InstanceSpec, Observed
from providers.local.tests.local_helpers import wait_until
from providers.slurm.job import claim_read, claim_write, report_path
from providers.slurm.tests.slurm_helpers import PREFIX, tenant

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]


def _spec(**kwargs) -> InstanceSpec:
    return InstanceSpec(
        node="", gpu_model="h200", image="cuda", disk_gb=20, **{"gpu_count": 1, "tenant": tenant(9001), **kwargs}
    )


def _until(backend, key, state, wanted: Observed, *, timeout=20.0):
    """Poll until the machine is ``wanted``; returns the last observation and the state it taught."""
    seen = {}

    def check():
        observation = backend.poll(key=key, state=seen.get("state", state))
        if observation.backend_state is not None:
            seen["state"] = observation.backend_state
        seen["observation"] = observation
        return observation.state == wanted

    wait_until(check, timeout=timeout, interval=0.2, what=f"{key} to be {wanted} (it is {seen.get('observation')})")
    return seen["observation"], seen.get("state", state)


@pytest.mark.parametrize("rest", [True, False], ids=["slurmrestd", "cli"])
def test_a_two_machine_cluster_gets_two_nodes_and_cancels_cleanly(on_slurm, slurm_cluster, rest):
    backend = on_slurm(rest=rest, services=())
    key = f"pair-{'rest' if rest else 'cli'}"
    state = backend.create(key=key, spec=_spec(gpu_count=2, nodes=2))
    assert backend.create(key=key, spec=_spec(gpu_count=2, nodes=2))["job_id"] == state["job_id"]  # a repeat finds it

    _observation, state = _until(backend, key, state, Observed.RUNNING)
    job = slurm_cluster.job(state["job_id"])
    assert job["node_count"] == 2 and job["tres_per_node"] == "gres:gpu:h200:2"
    assert job["user_name"] == tenant(9001).name  # submitted as the tenant (its token, or sbatch --uid)
    hosts = state["hosts"]
    assert len({h["node"] for h in hosts}) == 2  # both nodes reported, each with its own two cards
    assert all(len(h["gpus"]) == 2 for h in hosts)
    assert {h["node"] for h in hosts} == set(_expand(job["nodes"]))
    assert {m.key for m in backend.machines() if m.observed == Observed.RUNNING} >= {key}

    # The job's report is the tenant's claim: one pointing the console's proxy outside the job's
    # allocation (a metadata address) is refused (tests/security/test_slurm_forged_reports_are_refused.py).
    assert backend.proxy_target(key=key, service="lab") is None  # no lab here; and after the forgery:
    claim = report_path(backend._dir(key) / "run", 0)
    claim_write(claim, {**claim_read(claim), "host": "169.254.169.254", "ports": {}})
    assert backend.poll(key=key, state=state).state == Observed.PENDING  # no report it believes: not reachable
    assert backend.proxy_target(key=key, service="lab") is None and backend.ssh_target(key=key) is None

    state = backend.stop(key=key, state=state)
    _observation, state = _until(backend, key, state, Observed.STOPPED)
    assert slurm_cluster.active(f"{PREFIX}{key}") == []
    assert backend._dir(key).is_dir()  # the disk stays

    backend.destroy(key=key, state=state)
    backend.destroy(key=key, state=state)  # already gone counts as done
    assert backend.poll(key=key, state=state).state == Observed.GONE


def test_while_the_cluster_is_full_the_instance_waits_with_its_queue_position_and_reason(
    on_slurm, slurm_cluster, rich_alice
):
    backend = on_slurm(services=())
    everything = slurm_cluster.sbatch("--nodes=3", "--gres=gpu:h200:8", "--wrap=sleep 300", name="everything")
    wait_until(lambda: slurm_cluster.job(everything)["job_state"] == "RUNNING", timeout=20, what="the cluster to fill")
    earlier = backend.create(key="earlier", spec=_spec(gpu_count=8))
    with committed():
        instance = launch(rich_alice, gpu="h200", count=1, region="slurm-local", name="waits")

    def queued():
        instance_sync(instance_id=instance.pk)
        instance.refresh_from_db()
        return "reason Resources" in instance.status_reason_text or "reason Priority" in instance.status_reason_text

    wait_until(queued, timeout=20, interval=0.3, what=f"the reason to show (it says {instance.status_reason_text!r})")
    assert instance.status == "provisioning"
    assert instance.status_reason_text.startswith("Queued: position 2, reason ")  # behind "earlier"
    # The first in line waits for cards to free up; the scheduler says so within a cycle or two.
    wait_until(
        lambda: backend.poll(key="earlier", state=earlier).detail == "Queued: position 1, reason Resources",
        timeout=20,
        interval=0.3,
        what="Slurm to say the first in line waits for Resources",
    )
    assert instance.events.filter(new="provisioning").count() == 1  # the detail is no transition

    client = Client()
    client.force_login(rich_alice)
    page = client.get(f"/instances/{instance.pk}/?partial=body").content.decode()
    assert instance.status_reason_text in page

    with committed():
        instance_release(instance=instance)
    assert slurm_cluster.active(f"{PREFIX}{instance.key}") == []


def _expand(nodes: str) -> list[str]:
    """gpu[01-02] or gpu[01,03] -> node names (the two-node forms the test cluster produces)."""
    if "[" not in nodes:
        return [nodes]
    stem, inner = nodes.rstrip("]").split("[")
    names = []
    for part in inner.split(","):
        low, _, high = part.partition("-")
        names += [f"{stem}{i:0{len(low)}d}" for i in range(int(low), int(high or low) + 1)]
    return names
