"""A multi-node instance on a Kubernetes region: launched through the console, it is
a head (StatefulSet: home disk, JupyterLab and VS Code behind the proxy) and a Job of workers with a
headless Service; stop deletes the Job and scales the head to 0 (the cards go back), start makes it
again, release leaves nothing; the reconciler sees it as the instance's machine, not a stray."""

from __future__ import annotations

import base64

import pytest

from instances.models import Instance, Node, StrayMachine
from instances.proxy_targets import instance_proxy_target
from instances.reconciler import instances_reconcile
from instances.services import instance_release, instance_start, instance_stop, instance_sync
from instances.tests.conftest import committed, launch
from providers import get_backend
from providers.kubernetes import cluster_name, instance_name
from providers.kubernetes.tests.test_kubernetes_console import cluster  # noqa: F401  (the fixture)

S = Instance.Status


@pytest.fixture(autouse=True)
def quota(settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 16


def _free() -> dict[str, int]:
    return dict(Node.objects.filter(backend_alias="k8s").values_list("name", "free_cards"))


def test_two_nodes_of_eight_are_a_head_and_a_worker_that_stop_start_and_are_released(
    cluster,  # noqa: F811
    rich_alice,
):
    with committed():
        instance = launch(rich_alice, gpu="h200", region="k8s-1", count=8, nodes=2)
    instance.refresh_from_db()
    assert instance.status == S.PROVISIONING
    assert _free() == {"gpu-a": 0, "gpu-b": 0}
    name = cluster_name(instance.key)
    job = cluster.cluster.get("jobs", name)
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert cluster.cluster.get("services", name)["spec"]["clusterIP"] == "None"
    head = instance_name(instance.key)
    assert cluster.cluster.names("statefulsets") == [head]  # the head (rank 0): the workspace and its disk
    assert (job["spec"]["completions"], job["spec"]["parallelism"]) == (1, 1)  # the other node

    cluster.cluster.advance()
    instance_sync(instance_id=instance.pk)
    instance.refresh_from_db()
    assert instance.status == S.RUNNING
    assert sorted(p["spec"]["nodeName"] for p in cluster.cluster.list("pods")) == ["gpu-a", "gpu-b"]
    assert get_backend("k8s").entry_points(key=instance.key, state=instance.backend_state).web == ("lab", "code")
    # The console's proxy reaches JupyterLab on the head, with the token from the instance's Secret.
    target = instance_proxy_target(instance_id=str(instance.pk), service="lab", user=rich_alice)
    token = base64.b64decode(cluster.cluster.get("secrets", f"{head}-secrets")["data"]["jupyter-token"]).decode()
    assert (target.host, target.port) == (f"{head}.gpuc-user-{rich_alice.pk}.svc", 8888)
    assert target.headers == (("Authorization", f"token {token}"),)
    assert cluster.cluster.endpoints(head) == [f"{head}-0"]  # the Service sends to the head only

    report = instances_reconcile()  # the Job is this instance's machine: settled, not a stray
    assert report["stray"] == 0 and not StrayMachine.objects.exists()
    instance.refresh_from_db()
    assert instance.status == S.RUNNING

    with committed():
        instance_stop(instance=instance)
    instance.refresh_from_db()
    assert instance.status == S.STOPPED
    assert cluster.cluster.list("jobs") == [] and cluster.cluster.list("pods") == []
    assert cluster.cluster.get("services", name) is not None
    assert cluster.cluster.get("persistentvolumeclaims", f"{head}-home") is not None  # the home disk stays
    assert _free() == {"gpu-a": 8, "gpu-b": 8}

    with committed():
        instance_start(instance=instance)
    instance.refresh_from_db()
    assert instance.status == S.STARTING
    assert cluster.cluster.get("jobs", name)["spec"]["completions"] == 1
    assert cluster.cluster.get("statefulsets", head)["spec"]["replicas"] == 1
    cluster.cluster.advance()
    instance_sync(instance_id=instance.pk)
    instance.refresh_from_db()
    assert instance.status == S.RUNNING

    with committed():
        instance_release(instance=instance)
    instance.refresh_from_db()
    assert instance.status == S.RELEASED
    for plural in ("jobs", "pods", "services", "statefulsets", "secrets", "persistentvolumeclaims"):
        assert cluster.cluster.list(plural) == [], plural
    assert _free() == {"gpu-a": 8, "gpu-b": 8}
    assert cluster.cluster.refused == []
