"""The console on a Kubernetes region: launch, boot, the proxy's target, stop, start and release through
the instances services, with the Kubernetes backend talking to the fake API server; and what the
reconciler makes of a lost node and of an API that does not answer."""

from __future__ import annotations

import base64
from unittest import mock

import pytest

from console.hooks import proxy_target
from instances.catalogue import catalogue_seed
from instances.errors import LaunchInvalid
from instances.models import Image, Instance, Node
from instances.proxy_targets import instance_proxy_target
from instances.reconciler import instances_reconcile
from instances.services import (
    instance_provision,
    instance_release,
    instance_restart,
    instance_start,
    instance_stop,
    instance_sync,
)
from instances.tests.conftest import backends, committed, launch
from providers import get_backend
from providers.kubernetes import instance_name
from providers.kubernetes.tests.k8s_fake import fake_api_server

S = Instance.Status


@pytest.fixture
def cluster(settings, tmp_path, catalogue, hooks_override):
    """A region "k8s-1" whose backend is a Kubernetes namespace (the fake API server, two H200 nodes)."""
    with fake_api_server(tmp_path) as api:
        api.cluster.add_node("gpu-a", product="NVIDIA-H200", gpus=8)
        api.cluster.add_node("gpu-b", product="NVIDIA-H200", gpus=8)
        settings.PROVISIONING_BACKENDS = {
            **backends(),
            "k8s": {
                "BACKEND": "providers.kubernetes.backend.KubernetesBackend",
                "OPTIONS": {
                    "KUBECONFIG": str(api.kubeconfig),
                    "REGION": "k8s-1",
                    "REGION_NAME": "Kubernetes",
                    # The images this region has; the catalogue's others are refused at launch.
                    "IMAGES": {"pytorch-2.5-cu124": "registry.local/workspace/pytorch:2.5.1-cuda12.4"},
                },
            },
        }
        hooks_override(proxy_target, instance_proxy_target)
        catalogue_seed()  # the region named in the backend's OPTIONS
        yield api


def running_on_kubernetes(api, user, **kwargs) -> Instance:
    with committed():
        instance = launch(user, gpu="h200", region="k8s-1", **kwargs)
    instance.refresh_from_db()
    assert instance.status == S.PROVISIONING  # created; the pod is pending
    api.cluster.advance()
    instance_sync(instance_id=instance.pk)
    instance.refresh_from_db()
    return instance


def test_an_instance_runs_stops_starts_restarts_and_is_released(cluster, rich_alice, charlie):
    with committed():
        instance = launch(rich_alice, gpu="h200", region="k8s-1", count=2)
    instance.refresh_from_db()
    name = instance_name(instance.key)
    assert instance.backend_alias == "k8s" and instance.status == S.PROVISIONING
    assert set(Node.objects.filter(backend_alias="k8s").values_list("name", flat=True)) == {"gpu-a", "gpu-b"}
    placed = instance.node.name
    pod = cluster.cluster.get("pods", f"{name}-0")
    assert pod["spec"]["nodeName"] == placed
    # The catalogue's CPU cores and RAM per H200 card (16, 200 GB), for two cards: requested and limited.
    resources = pod["spec"]["containers"][0]["resources"]
    assert {k: resources["limits"][k] for k in ("cpu", "memory", "nvidia.com/gpu")} == {
        "cpu": "32",
        "memory": "400Gi",
        "nvidia.com/gpu": "2",
    }
    assert resources["requests"]["cpu"] == "32" and resources["requests"]["memory"] == "400Gi"

    instance_provision(instance_id=instance.pk)  # a redelivered task: 409s, the same machine
    assert cluster.cluster.names("statefulsets") == [name]
    cluster.cluster.advance()
    instance_sync(instance_id=instance.pk)
    instance.refresh_from_db()
    assert instance.status == S.RUNNING
    assert instance.backend_state["name"] == name

    target = instance_proxy_target(instance_id=str(instance.pk), service="lab", user=rich_alice)
    token = base64.b64decode(cluster.cluster.get("secrets", f"{name}-secrets")["data"]["jupyter-token"]).decode()
    # Its Service is in its owner's namespace, where the console's proxy reaches it.
    assert (target.host, target.port) == (f"{name}.gpuc-user-{rich_alice.pk}.svc", 8888)
    assert target.headers == (("Authorization", f"token {token}"),)
    assert instance_proxy_target(instance_id=str(instance.pk), service="lab", user=charlie) is None

    with committed():
        instance_stop(instance=instance)
    instance.refresh_from_db()
    assert instance.status == S.STOPPED
    assert cluster.cluster.list("pods") == []
    assert cluster.cluster.get("persistentvolumeclaims", f"{name}-home") is not None
    assert Node.objects.get(backend_alias="k8s", name=placed).free_cards == 8

    with committed():
        instance_start(instance=instance)
    instance.refresh_from_db()
    assert instance.status == S.STARTING
    cluster.cluster.advance()
    instance_sync(instance_id=instance.pk)
    instance.refresh_from_db()
    assert instance.status == S.RUNNING
    assert cluster.cluster.get("pods", f"{name}-0")["spec"]["nodeName"] == instance.node.name

    with committed():
        instance_restart(instance=instance)
    instance.refresh_from_db()
    assert instance.status == S.RESTARTING
    cluster.cluster.advance()
    instance_sync(instance_id=instance.pk)
    instance.refresh_from_db()
    assert instance.status == S.RUNNING

    with committed():
        instance_release(instance=instance)
        instance_release(instance=instance)
    instance.refresh_from_db()
    assert instance.status == S.RELEASED
    for plural in ("statefulsets", "pods", "services", "secrets", "persistentvolumeclaims"):
        assert cluster.cluster.list(plural) == [], plural
    assert cluster.cluster.refused == []  # every body the console's backend sent was valid
    # The tenant's namespace stays, fenced, for their next machine (and their volumes).
    assert cluster.cluster.get("networkpolicies", "tenant-fence", f"gpuc-user-{rich_alice.pk}") is not None


def test_an_image_the_region_lacks_is_refused_at_launch_by_name_and_nothing_is_made(cluster, rich_alice):
    with committed(), pytest.raises(LaunchInvalid, match=r"JAX 0\.4\.30") as refused:
        launch(rich_alice, gpu="h200", region="k8s-1", image="jax-0.4-cu124")
    assert refused.value.field == "image" and "not available in Kubernetes" in str(refused.value)
    assert not Instance.objects.filter(owner=rich_alice).exists()
    # Refused before anything was made: no tenant namespace, and nothing ran under another image.
    assert not [n for n in cluster.cluster.names("namespaces") if n.startswith("gpuc-")]
    for plural in ("statefulsets", "pods", "secrets"):
        assert cluster.cluster.list(plural) == [], plural


def test_an_image_unmapped_after_the_launch_fails_it_with_the_images_name_never_another_image(
    cluster, rich_alice, settings
):
    """The backend refuses too (the options changed between the launch and its task): the instance
    fails with a reason naming the image."""
    backend = get_backend("k8s")
    with committed(), mock.patch.object(type(backend), "has_image", return_value=True):
        instance = launch(rich_alice, gpu="h200", region="k8s-1", image="jax-0.4-cu124")
    instance.refresh_from_db()
    assert instance.status == S.FAILED
    assert "'jax-0.4-cu124' is not available" in instance.status_reason_text
    assert cluster.cluster.list("pods") == [] and cluster.cluster.list("statefulsets") == []


def test_a_cluster_that_pulls_the_consoles_registry_runs_the_pinned_digest_of_any_image(cluster, rich_alice, settings):
    """``CONSOLE_REGISTRY_PULLS``: the pod runs the launch's pinned reference, an image IMAGES does not
    map (JAX here) included; the mapped tag is not used, so a tag that moves later changes nothing."""
    settings.PROVISIONING_BACKENDS["k8s"]["OPTIONS"]["CONSOLE_REGISTRY_PULLS"] = True
    digest = "sha256:" + "ab" * 32
    Image.objects.filter(slug__in=("pytorch-2.5-cu124", "jax-0.4-cu124")).update(
        repository="registry.console.local/catalogue/x", digest=digest
    )
    for slug in ("pytorch-2.5-cu124", "jax-0.4-cu124"):
        instance = running_on_kubernetes(cluster, rich_alice, image=slug)
        assert instance.image_ref == f"registry.console.local/catalogue/x@{digest}"
        [pod] = [
            p for p in cluster.cluster.list("statefulsets") if p["metadata"]["name"] == instance_name(instance.key)
        ]
        images = {c["image"] for c in pod["spec"]["template"]["spec"]["containers"]}
        assert images == {instance.image_ref}, images


def test_without_the_registry_a_pinned_image_the_region_does_not_map_is_still_refused(cluster, rich_alice):
    Image.objects.filter(slug="jax-0.4-cu124").update(repository="registry.console.local/catalogue/jax", digest="")
    with committed(), pytest.raises(LaunchInvalid, match=r"JAX 0\.4\.30"):
        launch(rich_alice, gpu="h200", region="k8s-1", image="jax-0.4-cu124")


def test_a_node_that_stops_reporting_changes_nothing_and_a_removed_one_loses_the_instance(cluster, rich_alice):
    instance = running_on_kubernetes(cluster, rich_alice)
    node = instance.node.name

    cluster.cluster.node_set_ready(node, False)
    instances_reconcile()
    instance.refresh_from_db()
    assert instance.status == S.RUNNING  # UNKNOWN is not GONE: the node may come back
    assert Node.objects.get(backend_alias="k8s", name=node).is_healthy is False  # but nothing new goes there

    cluster.cluster.node_set_ready(node, True)
    cluster.cluster.node_delete(node)
    instances_reconcile()
    instance.refresh_from_db()
    assert instance.status == S.LOST
    assert instance.status_reason_text == f"node {node} was removed from the cluster"


def test_an_api_that_does_not_answer_changes_nothing(cluster, rich_alice):
    instance = running_on_kubernetes(cluster, rich_alice)
    cluster.stop()

    assert instance_sync(instance_id=instance.pk) is False
    report = instances_reconcile()
    instance.refresh_from_db()
    assert instance.status == S.RUNNING
    assert report["unreachable"] == ["k8s"]
