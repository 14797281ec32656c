"""A multi-node cluster on the fake API server: all pods start together only where the cluster has a
gang scheduler (Kueue, coscheduling); without one they may start partially, and the backend says
PENDING until every pod runs."""

from __future__ import annotations

import pytest

from providers.base import InstanceSpec, Observed
from providers.kubernetes import KubernetesBackend, cluster_name, instance_name
from providers.kubernetes.tests.k8s_fake import IMAGES, fake_api_server

KEY = "c0000000-1111-4222-8333-000000000001"
NAME = cluster_name(KEY)
HEAD = instance_name(KEY)
SPEC = InstanceSpec(node="", gpu_model="h200", gpu_count=8, image="pytorch-2.5-cu124", disk_gb=50, owner_ref="user-1")
COMMAND = ("torchrun", "--nnodes=3", "--nproc-per-node=8", "train.py")


@pytest.fixture
def api(tmp_path):
    with fake_api_server(tmp_path) as server:
        server.cluster.add_node("gpu-a", gpus=8)
        server.cluster.add_node("gpu-b", gpus=8)  # room for two of the three nodes
        yield server


def backend_for(api, **options) -> KubernetesBackend:
    return KubernetesBackend(alias="k8s", options={"KUBECONFIG": str(api.kubeconfig), "IMAGES": IMAGES, **options})


def pods(api) -> dict[str, str]:
    return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in api.cluster.list("pods")}


def test_without_a_gang_scheduler_pods_start_partially_and_the_cluster_stays_pending(api):
    backend = backend_for(api)
    state = backend.cluster_create(key=KEY, nodes=3, gpus_per_node=8, spec=SPEC, command=COMMAND)
    backend.cluster_create(key=KEY, nodes=3, gpus_per_node=8, spec=SPEC, command=COMMAND)  # 409s: the same

    assert len(pods(api)) == 3
    assert sorted(pods(api).values()) == ["", "gpu-a", "gpu-b"]  # two hold their cards, one waits
    api.cluster.advance()
    observation = backend.cluster_poll(key=KEY, state=state)
    assert (observation.state, observation.detail) == (Observed.PENDING, "2 of 3 pods running")

    api.cluster.add_node("gpu-c", gpus=8)
    api.cluster.advance()
    assert backend.cluster_poll(key=KEY, state=state).state == Observed.RUNNING

    backend.cluster_destroy(key=KEY, state=state)
    backend.cluster_destroy(key=KEY, state=state)
    for plural in ("pods", "jobs", "services", "statefulsets", "secrets", "persistentvolumeclaims"):
        assert api.cluster.list(plural) == [], plural
    assert backend.cluster_poll(key=KEY, state=state).state == Observed.GONE


def test_with_coscheduling_no_pod_is_bound_until_all_fit(api):
    api.cluster.gang_schedulers.add("scheduler-plugins-scheduler")
    backend = backend_for(api, GANG_SCHEDULING="coscheduling")
    state = backend.cluster_create(key=KEY, nodes=3, gpus_per_node=8, spec=SPEC, command=COMMAND)

    assert api.cluster.names("podgroups") == [NAME]
    assert sorted(pods(api).values()) == ["", "", ""]  # none holds cards while one cannot fit
    assert backend.cluster_poll(key=KEY, state=state).state == Observed.PENDING

    api.cluster.add_node("gpu-c", gpus=8)
    assert sorted(pods(api).values()) == ["gpu-a", "gpu-b", "gpu-c"]
    api.cluster.advance()
    assert backend.cluster_poll(key=KEY, state=state).state == Observed.RUNNING
    backend.cluster_destroy(key=KEY, state=state)
    assert api.cluster.list("podgroups") == []


def test_with_kueue_the_job_waits_suspended_until_admitted(api):
    backend = backend_for(api, KUEUE_QUEUE="team-a")
    state = backend.cluster_create(key=KEY, nodes=2, gpus_per_node=8, spec=SPEC, command=COMMAND)

    assert api.cluster.get("jobs", NAME)["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert list(pods(api)) == [f"{HEAD}-0"]  # the head is a StatefulSet outside the queue; no worker yet
    observation = backend.cluster_poll(key=KEY, state=state)
    assert observation.state == Observed.PENDING and observation.detail.startswith("queued")

    api.cluster.job_admit(NAME)  # Kueue: the whole quota fits
    assert sorted(pods(api).values()) == ["gpu-a", "gpu-b"]
    api.cluster.advance()
    assert backend.cluster_poll(key=KEY, state=state).state == Observed.RUNNING
    # Rank 0 is the head, found by the workers at MASTER_ADDR: its hostname under the headless Service.
    names = {(p["spec"]["hostname"], p["spec"]["subdomain"]) for p in api.cluster.list("pods")}
    assert names == {(f"{HEAD}-0", NAME), (f"{NAME}-0", NAME)}
    worker = api.cluster.get("jobs", NAME)["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "MASTER_ADDR", "value": f"{HEAD}-0.{NAME}"} in worker["env"]
    assert sorted(api.cluster.endpoints(NAME)) == sorted(pods(api))  # the headless Service: every rank
