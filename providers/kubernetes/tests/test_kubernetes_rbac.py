"""deploy/kubernetes/console-rbac.yaml is valid, and grants every request the backend makes (recorded
by the fake API server over a whole life: instance, app, volume, cluster, nodes, machines, watch)."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from providers.base import AppLaunch, InstanceSpec, TransientBackendError, VolumeMount
from providers.kubernetes import KubernetesBackend
from providers.kubernetes.tests.k8s_fake import IMAGES, fake_api_server, validate_manifest

RBAC = Path(__file__).resolve().parents[3] / "deploy/kubernetes/console-rbac.yaml"


def documents() -> list[dict]:
    return [doc for doc in yaml.safe_load_all(RBAC.read_text()) if doc]


def _rules(doc: dict) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in doc["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


TENANT_ROLE = "gpu-console-tenant"  # the backend's OPTIONS["TENANT_ROLE"] default, bound in each tenant's namespace


def granted() -> dict[str, set[tuple[str, str, str]]]:
    """(group, resource, verb) by where it holds: "cluster" (a ClusterRole bound cluster-wide, so in
    every namespace too), a namespace (a Role or ClusterRole bound there), "tenant" (the ClusterRole the
    backend binds in each tenant's namespace)."""
    docs = documents()
    roles = {(d["kind"], d["metadata"]["name"]): _rules(d) for d in docs if d["kind"] in ("Role", "ClusterRole")}
    scopes: dict[str, set] = {"cluster": set(), "tenant": roles[("ClusterRole", TENANT_ROLE)]}
    for binding in docs:
        if binding["kind"] == "ClusterRoleBinding":
            scopes["cluster"] |= roles[("ClusterRole", binding["roleRef"]["name"])]
        elif binding["kind"] == "RoleBinding":
            scope = scopes.setdefault(binding["metadata"]["namespace"], set())
            scope |= roles[(binding["roleRef"]["kind"], binding["roleRef"]["name"])]
    return scopes


def allowed(verb: str, group: str, resource: str, namespace: str) -> bool:
    scopes = granted()
    if (group, resource, verb) in scopes["cluster"]:
        return True
    if not namespace:
        return False
    scope = scopes["tenant"] if namespace.startswith("gpuc-") else scopes.get(namespace, set())
    return (group, resource, verb) in scope


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
            alias="k8s",
            options={
                "KUBECONFIG": str(api.kubeconfig),
                "GANG_SCHEDULING": "coscheduling",
                "IMAGES": IMAGES,
                "VOLUME_SNAPSHOT_CLASS": "csi-snapclass",
            },
        )
        key = "6f1c2a9b-03de-4f00-9000-000000000001"
        volume = backend.volume_create(key="0b7e0000-aaaa-4bbb-8ccc-000000000001", size_gb=10, owner_ref="user-1")
        backend.volume_resize(key="0b7e0000-aaaa-4bbb-8ccc-000000000001", state=volume, size_gb=20)
        app = AppLaunch(name="a", argv=("serve", "{port}"), image="a:1", port=7000)
        spec = InstanceSpec(
            node="gpu-a",
            gpu_model="h200",
            gpu_count=1,
            image="x",
            disk_gb=20,
            owner_ref="user-1",
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
        with contextlib.suppress(TransientBackendError):  # not ready at once: the task would retry
            backend.snapshot_create(key=key, state=state, snapshot="snap-1")
        api.cluster.advance()
        snapshot = backend.snapshot_create(key=key, state=state, snapshot="snap-1")
        backend.stop(key=key, state=state)
        api.cluster.advance()
        backend.snapshot_restore(key=key, state=state, snapshot="snap-1", snapshot_state=snapshot)
        backend.start(key=key, state=state, node="gpu-b", spec=spec)
        backend.snapshot_delete(key=key, state=state, snapshot="snap-1", snapshot_state=snapshot)
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
        made = set(api.cluster.scoped_requests)
        bindings = [b for b in api.cluster.list("rolebindings") if b["metadata"]["namespace"].startswith("gpuc-")]

    missing = {request for request in made if not allowed(*request)}
    assert missing == set()
    assert {r[2] for r in made} >= {"statefulsets", "pods", "services", "secrets", "persistentvolumeclaims", "jobs"}
    assert ("watch", "", "pods", "") in made  # one watch across the tenants' namespaces
    assert ("get", "", "pods/proxy", "gpu-operator") in made  # the DCGM exporter's metrics (Role gpu-console-dcgm)
    # The machine's objects were made in its tenant's namespace, where the backend bound the tenant role.
    assert ("create", "apps", "statefulsets", "gpuc-user-1") in made
    assert [(b["roleRef"]["kind"], b["roleRef"]["name"], b["subjects"]) for b in bindings] == [
        ("ClusterRole", TENANT_ROLE, [{"kind": "ServiceAccount", "name": "gpu-console", "namespace": "gpu-console"}])
    ]


def test_no_secret_nor_pod_of_any_namespace_is_writable_or_readable_cluster_wide():
    cluster = granted()["cluster"]
    assert not [rule for rule in cluster if rule[1] in ("secrets", "networkpolicies", "resourcequotas")]
    assert not [
        rule
        for rule in cluster
        if rule[1] in ("pods", "services", "statefulsets", "jobs") and rule[2] not in ("list", "watch")
    ]
    assert ("", "namespaces", "delete") not in cluster


def test_the_kubelet_proxy_is_not_granted_by_default():
    assert not any(resource == "nodes/proxy" for rules in granted().values() for _group, resource, _verb in rules)
