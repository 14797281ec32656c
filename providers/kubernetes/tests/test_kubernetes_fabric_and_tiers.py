"""Kubernetes on a real fabric and with the two tiers: a cluster's ranks get NCCL's environment and the
RDMA device plugin's resource, every pod its tier's PriorityClass, a Kueue Job its WorkloadPriorityClass;
each manifest valid against the Kubernetes schema, and a cluster made so on the fake API server."""

from __future__ import annotations

import dataclasses

import pytest

from providers.base import InstanceSpec, Observed, PermanentBackendError
from providers.kubernetes import (
    KubeOptions,
    KubernetesBackend,
    cluster_manifests,
    priority_class_manifests,
    statefulset_manifest,
)
from providers.kubernetes.tests.k8s_fake import IMAGES, fake_api_server, validate_manifest

KEY = "6f1c2a9b-03de-4f00-9000-000000000009"
RDMA = "rdma/hca_shared_devices_a"
OPTIONS = {
    "IMAGES": IMAGES,
    "NCCL_ENV": {"NCCL_SOCKET_IFNAME": "net1", "NCCL_IB_HCA": "mlx5"},
    "RDMA_RESOURCE": RDMA,
    "RDMA_PER_POD": 1,
    "PRIORITY_CLASSES": {"on-demand": "gpu-on-demand", "interruptible": "gpu-spot"},
    "KUEUE_PRIORITY_CLASSES": {"on-demand": "wl-on-demand", "interruptible": "wl-spot"},
}
SPEC = InstanceSpec(
    node="", gpu_model="h200", gpu_count=8, image="pytorch-2.5-cu124", disk_gb=50, nodes=2, owner_ref="user-1"
)


def opts(**options) -> KubeOptions:
    return KubeOptions.from_options({**OPTIONS, **options}, namespace="gpu-console", alias="k8s")


def build(options: KubeOptions, spec: InstanceSpec = SPEC) -> list[dict]:
    return cluster_manifests(
        options, alias="k8s", key=KEY, spec=spec, nodes=2, gpus_per_node=8, command=("torchrun", "train.py")
    )


def by_kind(manifests: list[dict], kind: str) -> dict:
    return next(m for m in manifests if m["kind"] == kind)


def gpu_containers(pod_spec: dict) -> list[dict]:
    return [c for c in pod_spec["containers"] if "nvidia.com/gpu" in c.get("resources", {}).get("limits", {})]


@pytest.mark.parametrize("gang", ["", "kueue", "coscheduling"])
@pytest.mark.parametrize("interruptible", [False, True])
def test_every_manifest_of_a_cluster_on_the_fabric_is_valid(gang, interruptible):
    options = opts(GANG_SCHEDULING=gang, KUEUE_QUEUE="team-a" if gang == "kueue" else "")
    for manifest in build(options, dataclasses.replace(SPEC, interruptible=interruptible)):
        if manifest["kind"] != "PodGroup":  # the PodGroup's own schema is checked in test_kubernetes_manifests
            validate_manifest(manifest)


def test_the_tiers_priority_classes_are_valid_and_spot_never_preempts():
    on_demand, spot = priority_class_manifests(opts())
    for manifest in (on_demand, spot):
        validate_manifest(manifest)
    assert (on_demand["metadata"]["name"], on_demand["preemptionPolicy"]) == ("gpu-on-demand", "PreemptLowerPriority")
    assert (spot["metadata"]["name"], spot["preemptionPolicy"]) == ("gpu-spot", "Never")
    assert on_demand["value"] > spot["value"]
    assert priority_class_manifests(KubeOptions()) == []


def test_every_rank_gets_nccls_environment_and_the_rdma_resource():
    manifests = build(opts())
    head = by_kind(manifests, "StatefulSet")["spec"]["template"]["spec"]
    worker = by_kind(manifests, "Job")["spec"]["template"]["spec"]
    for pod in (head, worker):
        [rank] = gpu_containers(pod)
        env = {e["name"]: e.get("value") for e in rank["env"]}
        assert env["NCCL_SOCKET_IFNAME"] == "net1" and env["NCCL_IB_HCA"] == "mlx5"
        assert rank["resources"]["limits"][RDMA] == rank["resources"]["requests"][RDMA] == "1"


def test_a_single_machine_asks_for_no_fabric_but_carries_its_tier():
    single = dataclasses.replace(SPEC, nodes=1, node="gpu-a", interruptible=True)
    manifest = statefulset_manifest(opts(), alias="k8s", key=KEY, spec=single)
    validate_manifest(manifest)
    pod = manifest["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "gpu-spot"
    [container] = gpu_containers(pod)
    assert RDMA not in container["resources"]["limits"]
    assert not any(e["name"].startswith("NCCL_") for e in container["env"])


@pytest.mark.parametrize(
    ("interruptible", "pod_class", "workload_class"),
    [(False, "gpu-on-demand", "wl-on-demand"), (True, "gpu-spot", "wl-spot")],
)
def test_pods_carry_their_tiers_class_and_a_kueue_job_its_workload_priority(interruptible, pod_class, workload_class):
    manifests = build(
        opts(GANG_SCHEDULING="kueue", KUEUE_QUEUE="team-a"), dataclasses.replace(SPEC, interruptible=interruptible)
    )
    job = by_kind(manifests, "Job")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == workload_class
    assert job["spec"]["template"]["spec"]["priorityClassName"] == pod_class
    assert by_kind(manifests, "StatefulSet")["spec"]["template"]["spec"]["priorityClassName"] == pod_class


def test_without_the_options_nothing_is_added():
    manifests = build(KubeOptions(namespace="gpu-console", images=tuple(IMAGES.items())))
    job = by_kind(manifests, "Job")
    assert "priorityClassName" not in job["spec"]["template"]["spec"]
    assert "kueue.x-k8s.io/priority-class" not in job["metadata"]["labels"]
    [rank] = gpu_containers(job["spec"]["template"]["spec"])
    assert list(rank["resources"]["limits"]) == ["nvidia.com/gpu", "ephemeral-storage"]  # no RDMA


@pytest.mark.parametrize(
    "bad",
    [
        {"NCCL_ENV": {"NCCL IB": "x"}},
        {"RDMA_RESOURCE": "not a resource"},
        {"RDMA_PER_POD": 0},
        {"PRIORITY_CLASSES": {"spot": "gpu-spot"}},
        {"KUEUE_PRIORITY_CLASSES": {"gold": "x"}},
    ],
)
def test_bad_fabric_and_tier_options_are_refused_plainly(bad):
    with pytest.raises(PermanentBackendError):
        opts(**bad)


def test_a_cluster_on_the_fake_api_server_runs_with_its_fabric_and_tier(tmp_path):
    with fake_api_server(tmp_path) as api:
        api.cluster.add_node("gpu-a", gpus=8)
        api.cluster.add_node("gpu-b", gpus=8)
        backend = KubernetesBackend(alias="k8s", options={"KUBECONFIG": str(api.kubeconfig), **OPTIONS})
        spec = dataclasses.replace(SPEC, interruptible=True)
        state = backend.cluster_create(key=KEY, nodes=2, gpus_per_node=8, spec=spec, command=("torchrun", "train.py"))
        api.cluster.advance()
        assert backend.cluster_poll(key=KEY, state=state).state == Observed.RUNNING
        pods = api.cluster.list("pods")
        assert len(pods) == 2
        for pod in pods:
            assert pod["spec"]["priorityClassName"] == "gpu-spot"
            [rank] = gpu_containers(pod["spec"])
            assert rank["resources"]["requests"][RDMA] == "1"
            assert {"name": "NCCL_IB_HCA", "value": "mlx5"} in rank["env"]
        assert not backend.supports_cluster_resize
