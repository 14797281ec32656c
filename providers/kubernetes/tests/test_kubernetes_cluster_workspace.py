"""A multi-node instance on Kubernetes is as usable as a single machine: its head (rank 0) has the home
disk, the workspace's servers and the instance's Service; every pod mounts the user's volumes and the
public claims; a ReadWriteOnce volume cannot be written from several nodes."""

from __future__ import annotations

import base64

import pytest

from providers.base import AppLaunch, InstanceSpec, Observed, PermanentBackendError, VolumeMount
from providers.kubernetes import KubernetesBackend, cluster_name, instance_name
from providers.kubernetes.tests.k8s_fake import IMAGES, fake_api_server, parse_selector

KEY = "c0000000-2222-4333-8444-000000000002"
VOLUME = "0b7e0000-aaaa-4bbb-8ccc-000000000009"
HEAD, WORKERS = instance_name(KEY), cluster_name(KEY)


def spec(*, read_only: bool, app: AppLaunch | None = None) -> InstanceSpec:
    return InstanceSpec(
        node="gpu-a",
        gpu_model="h200",
        gpu_count=8,
        image="pytorch",
        disk_gb=50,
        ssh_public_keys=("ssh-ed25519 AAAA alice@laptop",),
        owner_ref="user-1",
        app=app,
        volumes=(VolumeMount(key=VOLUME, path="/data", read_only=read_only),),
        nodes=2,
        peer_nodes=("gpu-b",),
    )


@pytest.fixture
def api(tmp_path):
    with fake_api_server(tmp_path) as server:
        server.cluster.add_node("gpu-a", gpus=8)
        server.cluster.add_node("gpu-b", gpus=8)
        # The public claim, where the tenant's pods can mount it: in the tenant's namespace.
        server.cluster.add_namespace(
            "gpuc-user-1", labels={"app.kubernetes.io/managed-by": "gpu-console", "console.gpu/tenant": "user-1"}
        )
        server.cluster.add_claim("public-models", namespace="gpuc-user-1")
        yield server


def backend_for(api, **options) -> KubernetesBackend:
    options = {
        "KUBECONFIG": str(api.kubeconfig),
        "PUBLIC_VOLUMES": {"/models": "public-models"},
        "IMAGES": IMAGES,
        **options,
    }
    return KubernetesBackend(alias="k8s", options=options)


def claims(pod: dict) -> dict[str, tuple[str, bool]]:
    """mount path -> (claim, read-only) for the pod's first container."""
    by_name = {
        v["name"]: (v["persistentVolumeClaim"]["claimName"], bool(v["persistentVolumeClaim"].get("readOnly")))
        for v in pod["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    }
    return {
        m["mountPath"]: by_name[m["name"]] for m in pod["spec"]["containers"][0]["volumeMounts"] if m["name"] in by_name
    }


def the_pods(api) -> tuple[dict, list[dict]]:
    pods = api.cluster.list("pods")
    head = [p for p in pods if p["metadata"]["name"] == f"{HEAD}-0"]
    assert len(head) == 1, [p["metadata"]["name"] for p in pods]
    return head[0], [p for p in pods if p is not head[0] and p["metadata"]["name"] != f"{HEAD}-0"]


def test_the_head_has_the_home_disk_and_the_servers_and_every_pod_the_volumes(api):
    backend = backend_for(api)
    backend.volume_create(key=VOLUME, size_gb=100, owner_ref="user-1")  # ReadWriteOnce: mounted read-only on a cluster
    state = backend.create(key=KEY, spec=spec(read_only=True))
    assert backend.create(key=KEY, spec=spec(read_only=True))["secrets"] == state["secrets"]  # a retry: same tokens
    api.cluster.advance()
    assert backend.poll(key=KEY, state=state).state == Observed.RUNNING

    head, workers = the_pods(api)
    assert len(workers) == 1 and {head["spec"]["nodeName"], workers[0]["spec"]["nodeName"]} == {"gpu-a", "gpu-b"}
    assert claims(head) == {
        "/workspace": (f"{HEAD}-home", False),
        "/data": (f"vol-{VOLUME}", True),
        "/models": ("public-models", True),
    }
    assert claims(workers[0]) == {"/data": (f"vol-{VOLUME}", True), "/models": ("public-models", True)}
    workspace = head["spec"]["containers"][0]
    assert workspace["name"] == "workspace" and {p["name"] for p in workspace["ports"]} >= {"lab", "code", "ssh"}
    assert [c["name"] for c in workers[0]["spec"]["containers"]] == ["worker"]

    # The instance's Service selects the head only; the headless one every rank.
    service = api.cluster.get("services", HEAD)
    match = parse_selector(",".join(f"{k}={v}" for k, v in service["spec"]["selector"].items()))
    assert match(head["metadata"]["labels"]) and not match(workers[0]["metadata"]["labels"])
    assert api.cluster.endpoints(HEAD) == [f"{HEAD}-0"]
    assert sorted(api.cluster.endpoints(WORKERS)) == sorted(p["metadata"]["name"] for p in (head, *workers))

    assert backend.entry_points(key=KEY, state=state).web == ("lab", "code")
    target = backend.proxy_target(key=KEY, service="lab")
    token = base64.b64decode(api.cluster.get("secrets", f"{HEAD}-secrets")["data"]["jupyter-token"]).decode()
    assert (target.host, target.port) == (f"{HEAD}.gpuc-user-1.svc", 8888)
    assert target.headers == (("Authorization", f"token {token}"),) and token == state["secrets"]["lab"]
    code = backend.proxy_target(key=KEY, service="code")
    assert code.port == 8080 and code.cookies[0][1] == state["secrets"]["code"]

    # Stop: every pod goes, the disk stays; start brings the head back onto the same disk.
    backend.stop(key=KEY, state=state)
    assert api.cluster.list("pods") == [] and backend.poll(key=KEY, state=state).state == Observed.STOPPED
    home = api.cluster.get("persistentvolumeclaims", f"{HEAD}-home")
    assert home is not None
    backend.start(key=KEY, state=state, node="", spec=spec(read_only=True))
    api.cluster.advance()
    assert backend.poll(key=KEY, state=state).state == Observed.RUNNING
    assert api.cluster.get("persistentvolumeclaims", f"{HEAD}-home")["metadata"]["uid"] == home["metadata"]["uid"]
    assert claims(the_pods(api)[0])["/workspace"] == (f"{HEAD}-home", False)

    machines = [m for m in backend.machines() if m.key == KEY]
    assert [(m.cards, m.observed) for m in machines] == [(16, Observed.RUNNING)]

    backend.destroy(key=KEY, state=state)
    for plural in ("pods", "jobs", "statefulsets", "services", "secrets"):
        assert api.cluster.list(plural) == [], plural
    # The home disk went; the user's volume and the public claim stay.
    assert api.cluster.names("persistentvolumeclaims") == ["public-models", f"vol-{VOLUME}"]
    assert api.cluster.refused == []


def test_a_read_write_once_volume_written_from_several_nodes_is_refused(api):
    backend = backend_for(api)
    backend.volume_create(key=VOLUME, size_gb=100, owner_ref="user-1")
    with pytest.raises(PermanentBackendError, match="read-only") as refused:
        backend.create(key=KEY, spec=spec(read_only=False))
    assert "ReadWriteOnce" in str(refused.value)
    assert api.cluster.names("persistentvolumeclaims") == ["public-models", f"vol-{VOLUME}"]  # nothing was made
    assert api.cluster.list("statefulsets") == [] and api.cluster.list("jobs") == []


def test_a_shared_volume_is_written_from_every_node(api):
    backend = backend_for(api, VOLUME_RWX=True)
    backend.volume_create(key=VOLUME, size_gb=100, owner_ref="user-1")
    backend.create(key=KEY, spec=spec(read_only=False))
    head, workers = the_pods(api)
    assert claims(head)["/data"] == claims(workers[0])["/data"] == (f"vol-{VOLUME}", False)


def test_a_clusters_app_is_served_from_the_head(api):
    app = AppLaunch(
        name="vllm",
        argv=("vllm", "serve", "m", "--port", "{port}"),
        image="vllm:1",
        port=8000,
        serves_base_path=False,
    )
    backend = backend_for(api)
    backend.volume_create(key=VOLUME, size_gb=100, owner_ref="user-1")
    state = backend.create(key=KEY, spec=spec(read_only=True, app=app))
    api.cluster.advance()
    assert backend.poll(key=KEY, state=state).state == Observed.RUNNING
    assert backend.entry_points(key=KEY, state=state).web == ("lab", "code", "app")
    target = backend.proxy_target(key=KEY, service="app")
    assert (target.port, target.strip_prefix) == (8000, True)
    assert target.headers == (("Authorization", f"Bearer {state['secrets']['app']}"),)
    _head, workers = the_pods(api)
    assert workers[0]["spec"]["containers"][0]["args"] == ["vllm", "serve", "m", "--port", "8000"]
