"""deploy/kubernetes/console-rbac.yaml is valid, and grants every request the backend makes (recorded
by the fake API server over a whole life: instance, app, volume, cluster, nodes, machines, watch)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from instances.tests.k8s_fake import fake_api_server, validate_manifest
from providers.base import AppLaunch, InstanceSpec, VolumeMount
from providers.kubernetes import KubernetesBackend

RBAC = Path(__file__).resolve().parents[2] / "deploy/kubernetes/console-rbac.yaml"


def documents() -> list[dict]:
    return [doc for doc in yaml.safe_load_all(RBAC.read_text()) if doc]


def granted() -> set[tuple[str, str, str, str]]:
    """(scope, group, resource, verb) for every rule: scope "namespace" (Role) or "cluster"."""
    rules = set()
    for doc in documents():
        if doc["kind"] not in ("Role", "ClusterRole"):
            continue
        scope = "namespace" if doc["kind"] == "Role" else "cluster"
        for rule in doc["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        rules.add((scope, group, resource, verb))
    return rules


@pytest.mark.parametrize("document", documents(), ids=lambda d: f"{d['kind']}-{d['metadata']['name']}")
def test_each_rbac_document_is_valid(document):
    validate_manifest(document)


def test_the_bindings_name_the_roles_and_service_account_the_file_defines():
    docs = documents()
    account = next(d for d in docs if d["kind"] == "ServiceAccount")
    roles = {(d["kind"], d["metadata"]["name"]) for d in docs if d["kind"] in ("Role", "ClusterRole")}
    for binding in (d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        assert (binding["roleRef"]["kind"], binding["roleRef"]["name"]) in roles
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "gpu-console"}
        ]


def test_the_rules_cover_every_request_the_backend_makes(tmp_path):
    with fake_api_server(tmp_path) as api:
        api.cluster.add_node("gpu-a", gpus=8)
        api.cluster.add_node("gpu-b", gpus=8)
        backend = KubernetesBackend(
            alias="k8s", options={"KUBECONFIG": str(api.kubeconfig), "GANG_SCHEDULING": "coscheduling"}
        )
        key = "6f1c2a9b-03de-4f00-9000-000000000001"
        volume = backend.volume_create(key="0b7e0000-aaaa-4bbb-8ccc-000000000001", size_gb=10)
        backend.volume_resize(key="0b7e0000-aaaa-4bbb-8ccc-000000000001", state=volume, size_gb=20)
        app = AppLaunch(name="a", argv=("serve", "{port}"), image="a:1", port=7000)
        spec = InstanceSpec(
            node="gpu-a",
            gpu_model="h200",
            gpu_count=1,
            image="x",
            disk_gb=20,
            app=app,
            volumes=(VolumeMount(key="0b7e0000-aaaa-4bbb-8ccc-000000000001", path="/data"),),
        )
        backend.nodes()
        state = backend.create(key=key, spec=spec)
        backend.create(key=key, spec=spec)
        api.cluster.advance()
        backend.poll(key=key, state=state)
        backend.machines()
        backend.entry_points(key=key, state=state)
        backend.proxy_target(key=key, service="lab")
        backend.proxy_target(key=key, service="app")
        api.cluster.add_dcgm_exporter("gpu-a", "")
        backend.gpu_samples(machines=[(key, state)], at=datetime.now(UTC))
        list(backend.watch_pods(timeout_s=1))  # wall-clock: only the verb is checked, not what it hears
        backend.restart(key=key, state=state, spec=spec)
        backend.stop(key=key, state=state)
        backend.start(key=key, state=state, node="gpu-b", spec=spec)
        backend.destroy(key=key, state=state)
        read_only = (VolumeMount(key="0b7e0000-aaaa-4bbb-8ccc-000000000001", path="/data", read_only=True),)
        cluster_spec = replace(spec, node="", nodes=2, volumes=read_only)
        cluster = backend.create(key=key, spec=cluster_spec)
        backend.cluster_poll(key=key, state=cluster)
        backend.proxy_target(key=key, service="lab")
        backend.stop(key=key, state=cluster)
        backend.start(key=key, state=cluster, node="", spec=cluster_spec)
        backend.cluster_destroy(key=key, state=cluster)
        backend.volume_destroy(key="0b7e0000-aaaa-4bbb-8ccc-000000000001", state=volume)
        made = set(api.cluster.requests)

    rules = granted()
    missing = {
        (verb, group, resource)
        for verb, group, resource in made
        if (("cluster" if resource.startswith("nodes") else "namespace"), group, resource, verb) not in rules
    }
    assert missing == set()
    assert {r[2] for r in made} >= {"statefulsets", "pods", "services", "secrets", "persistentvolumeclaims", "jobs"}
    assert ("watch", "", "pods") in made
    assert ("get", "", "pods/proxy") in made  # the DCGM exporter's metrics (Role gpu-console-dcgm)


def test_the_kubelet_proxy_is_not_granted_by_default():
    assert not any(resource == "nodes/proxy" for _scope, _group, resource, _verb in granted())
