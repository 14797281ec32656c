"""The Kubernetes backend against the fake API server: the machine's life (create, boot, stop, start,
restart, destroy), repeats that must be harmless, nodes and their health, and an API that fails."""

from __future__ import annotations

import base64
import threading

import pytest

from providers.base import (
    AppLaunch,
    InstanceSpec,
    Observed,
    PermanentBackendError,
    TransientBackendError,
    VolumeMount,
)
from providers.kubernetes import KubernetesBackend, instance_name
from providers.kubernetes.tests.k8s_fake import IMAGES, fake_api_server

KEY = "6f1c2a9b-03de-4f00-9000-000000000001"
OTHER = "6f1c2a9b-03de-4f00-9000-000000000002"  # same first 12 hex digits: the same object names
NAME = instance_name(KEY)


def spec(**changes) -> InstanceSpec:
    fields = {
        "node": "gpu-a",
        "gpu_model": "h200",
        "gpu_count": 2,
        "image": "pytorch-2.5-cu124",
        "disk_gb": 50,
        "ssh_public_keys": ("ssh-ed25519 AAAAC3Nza alice@laptop",),
        "owner_ref": "user-1",
    }
    return InstanceSpec(**{**fields, **changes})


@pytest.fixture
def api(tmp_path):
    with fake_api_server(tmp_path) as server:
        server.cluster.add_node("gpu-a", product="NVIDIA-H200", gpus=8)
        server.cluster.add_node("gpu-b", product="NVIDIA-H200", gpus=8)
        yield server


def backend_for(server, **options) -> KubernetesBackend:
    return KubernetesBackend(
        alias="k8s", options={"KUBECONFIG": str(server.kubeconfig), "REGION": "k8s-1", "IMAGES": IMAGES, **options}
    )


@pytest.fixture
def backend(api):
    return backend_for(api)


def test_create_makes_a_statefulset_of_one_gpu_pod_pending_then_running(api, backend):
    state = backend.create(key=KEY, spec=spec())

    sts = api.cluster.get("statefulsets", NAME)
    assert sts["spec"]["replicas"] == 1
    assert sts["metadata"]["labels"]["console.gpu/instance"] == KEY
    assert sts["metadata"]["labels"]["console.gpu/owner"] == "user-1"
    pod = api.cluster.get("pods", f"{NAME}-0")
    workspace = pod["spec"]["containers"][0]
    assert workspace["resources"] == {
        "requests": {"nvidia.com/gpu": "2", "ephemeral-storage": "10Gi"},
        "limits": {"nvidia.com/gpu": "2", "ephemeral-storage": "50Gi"},  # the writable layer: the disk's size
    }
    assert pod["metadata"]["namespace"] == "gpuc-user-1"  # its owner's namespace, not the console's
    assert pod["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H200"}
    assert pod["spec"]["nodeName"] == "gpu-a"  # pinned where the console placed it
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert api.cluster.get("persistentvolumeclaims", f"{NAME}-home")["spec"]["resources"]["requests"] == {
        "storage": "50Gi"
    }
    ports = {p["name"]: p["port"] for p in api.cluster.get("services", NAME)["spec"]["ports"]}
    assert ports == {"lab": 8888, "code": 8080, "ssh": 22}
    assert state["name"] == NAME and state["node"] == "gpu-a" and state["secrets"]["lab"]

    assert backend.poll(key=KEY, state=state).state == Observed.PENDING
    api.cluster.advance()  # the kubelet starts it
    assert backend.poll(key=KEY, state=state).state == Observed.RUNNING


def test_the_pod_reads_its_secrets_from_a_secret_and_the_state_keeps_them(api, backend):
    state = backend.create(key=KEY, spec=spec())
    secret = api.cluster.get("secrets", f"{NAME}-secrets")

    assert base64.b64decode(secret["data"]["jupyter-token"]).decode() == state["secrets"]["lab"]
    assert base64.b64decode(secret["data"]["authorized_keys"]).decode() == "ssh-ed25519 AAAAC3Nza alice@laptop\n"
    pod = api.cluster.get("pods", f"{NAME}-0")
    workspace = pod["spec"]["containers"][0]
    # Never in the environment (inherited by every child, kept by a saved image): files, read-only.
    assert not [e for e in workspace["env"] if "valueFrom" in e or "TOKEN" in e["name"] or "PASSWORD" in e["name"]]
    assert state["secrets"]["lab"] not in str(pod["spec"])
    mount = next(m for m in workspace["volumeMounts"] if m["mountPath"] == "/etc/console")
    assert mount["readOnly"] is True
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == f"{NAME}-secrets" and volume["secret"]["defaultMode"] == 0o440
    assert {i["path"] for i in volume["secret"]["items"]} >= {"authorized_keys", "jupyter-token", "code-server.yaml"}
    code_config = base64.b64decode(secret["data"]["code-server.yaml"]).decode()
    assert f'hashed-password: "{state["secrets"]["code"]}"' in code_config


def test_creating_twice_finds_the_same_machine_after_409s(api, backend):
    first = backend.create(key=KEY, spec=spec())
    second = backend.create(key=KEY, spec=spec())

    assert second == first  # the tokens were read back from the Secret, not minted again
    assert api.cluster.names("statefulsets") == [NAME]
    assert api.cluster.names("pods") == [f"{NAME}-0"]
    tenant = ("namespaces", "rolebindings", "networkpolicies")
    creates = [r for r in api.cluster.requests if r[0] == "create" and r[2] not in tenant]
    assert len(creates) == 8  # four objects, each sent twice: the second time 409 AlreadyExists
    # The tenant's namespace, the console's rights there and its fence once: this process remembers them.
    assert [r[2] for r in api.cluster.requests if r[2] in tenant] == list(tenant)


def test_a_name_taken_by_another_instance_is_refused_not_shared(api, backend):
    backend.create(key=KEY, spec=spec())
    with pytest.raises(PermanentBackendError, match="taken by another"):
        backend.create(key=OTHER, spec=spec())


def test_stop_scales_to_zero_and_keeps_the_disk_start_brings_it_back(api, backend):
    state = backend.create(key=KEY, spec=spec())
    api.cluster.advance()

    state = backend.stop(key=KEY, state=state)
    assert api.cluster.get("statefulsets", NAME)["spec"]["replicas"] == 0
    assert api.cluster.names("pods") == []  # its GPUs went back to the node
    assert api.cluster.get("persistentvolumeclaims", f"{NAME}-home") is not None
    assert api.cluster.get("secrets", f"{NAME}-secrets") is not None
    assert backend.poll(key=KEY, state=state).state == Observed.STOPPED
    assert backend.stop(key=KEY, state=state) == state  # stopped counts as done

    state = backend.start(key=KEY, state=state, node="gpu-b", spec=spec(node="gpu-b"))
    assert api.cluster.get("pods", f"{NAME}-0")["spec"]["nodeName"] == "gpu-b"  # moved where placed
    assert backend.poll(key=KEY, state=state).state == Observed.PENDING
    api.cluster.advance()
    assert backend.poll(key=KEY, state=state).state == Observed.RUNNING
    assert state["node"] == "gpu-b"


def test_start_without_a_spec_keeps_the_template_and_moves_the_pin(api, backend):
    state = backend.create(key=KEY, spec=spec())
    backend.stop(key=KEY, state=state)
    backend.start(key=KEY, state=state, node="gpu-b")
    pod = api.cluster.get("pods", f"{NAME}-0")
    assert pod["spec"]["nodeName"] == "gpu-b"
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"


def test_restart_replaces_the_pod_and_refuses_a_stopped_machine(api, backend):
    state = backend.create(key=KEY, spec=spec())
    api.cluster.advance()
    uid = api.cluster.get("pods", f"{NAME}-0")["metadata"]["uid"]

    backend.restart(key=KEY, state=state)
    assert api.cluster.get("pods", f"{NAME}-0")["metadata"]["uid"] != uid
    assert backend.poll(key=KEY, state=state).state == Observed.PENDING
    api.cluster.advance()
    assert backend.poll(key=KEY, state=state).state == Observed.RUNNING

    backend.stop(key=KEY, state=state)
    with pytest.raises(PermanentBackendError, match="running"):
        backend.restart(key=KEY, state=state)


def test_destroy_deletes_everything_and_twice_is_fine(api, backend):
    state = backend.create(key=KEY, spec=spec())
    backend.destroy(key=KEY, state=state)
    backend.destroy(key=KEY, state=state)  # every delete is a 404 now: done

    for plural in ("statefulsets", "pods", "services", "secrets", "persistentvolumeclaims"):
        assert api.cluster.names(plural) == [], plural
    assert backend.poll(key=KEY, state=state).state == Observed.GONE
    with pytest.raises(PermanentBackendError):
        backend.start(key=KEY, state=state, node="gpu-a")
    with pytest.raises(PermanentBackendError):
        backend.stop(key=KEY, state=state)


def test_an_unmapped_gpu_model_is_refused_before_anything_is_made(api, backend):
    with pytest.raises(PermanentBackendError, match="no nodes for the GPU model"):
        backend.create(key=KEY, spec=spec(gpu_model="mystery-9000"))
    assert api.cluster.names("statefulsets") == []


def test_a_pod_that_cannot_be_scheduled_is_pending_with_the_schedulers_reason(api, backend):
    state = backend.create(key=KEY, spec=spec(gpu_count=16))
    observation = backend.poll(key=KEY, state=state)
    assert observation.state == Observed.PENDING
    assert "Insufficient nvidia.com/gpu" in observation.detail


def test_a_crash_looping_workspace_is_degraded_and_start_replaces_the_pod(api, backend):
    api.cluster.crashing_images.add(IMAGES["pytorch-2.5-cu124"])
    state = backend.create(key=KEY, spec=spec())
    api.cluster.advance()
    observation = backend.poll(key=KEY, state=state)
    assert observation.state == Observed.DEGRADED
    assert observation.detail.startswith("workspace keeps crashing (exit code 1: console: none of the servers")

    uid = api.cluster.get("pods", f"{NAME}-0")["metadata"]["uid"]
    backend.start(key=KEY, state=state, node="gpu-a")  # the console's repair
    assert api.cluster.get("pods", f"{NAME}-0")["metadata"]["uid"] != uid


def test_an_app_runs_in_its_own_container_with_the_gpus_and_a_readiness_probe(api, backend):
    app = AppLaunch(
        name="vllm",
        argv=("vllm", "serve", "Qwen/Qwen2.5-7B", "--port", "{port}", "--root-path", "{base_path}"),
        image="vllm/vllm-openai:v0.9.0",
        port=8000,
        env=(("HF_HOME", "/workspace/.hf"),),
        health_path="/health",
    )
    state = backend.create(key=KEY, spec=spec(app=app))
    containers = {c["name"]: c for c in api.cluster.get("pods", f"{NAME}-0")["spec"]["containers"]}
    served = containers["app"]
    assert served["image"] == "vllm/vllm-openai:v0.9.0"
    assert served["command"][:2] == ["/bin/sh", "-c"]  # reads its key from the mounted Secret, then execs
    assert served["args"] == [
        "vllm",
        "serve",
        "Qwen/Qwen2.5-7B",
        "--port",
        "8000",
        "--root-path",
        f"/i/{KEY}/app",
    ]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in served["env"]}
    assert env["HF_HOME"] == "/workspace/.hf" and env["PORT"] == "8000" and env["APP_BASE_PATH"] == f"/i/{KEY}/app"
    # The server's own key comes from the instance's Secret, as a file (never in the pod's spec); the
    # proxy sends it as a Bearer token.
    assert "APP_API_KEY" not in env and "/etc/console/app-api-key" in served["command"][2]
    assert {"name": "app-key", "mountPath": "/etc/console", "readOnly": True} in served["volumeMounts"]
    assert served["readinessProbe"]["httpGet"] == {"path": f"/i/{KEY}/app/health", "port": 8000}
    assert served["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert "nvidia.com/gpu" not in containers["workspace"]["resources"]["limits"]  # one container gets the cards
    assert {p["name"]: p["port"] for p in api.cluster.get("services", NAME)["spec"]["ports"]}["app"] == 8000

    api.cluster.unready_containers.add("app")  # the model is still loading
    api.cluster.advance()
    observation = backend.poll(key=KEY, state=state)
    assert (observation.state, observation.detail) == (Observed.PENDING, "waiting for app to be ready")
    api.cluster.container_set_ready("app")
    assert backend.poll(key=KEY, state=state).state == Observed.RUNNING
    target = backend.proxy_target(key=KEY, service="app")
    assert (target.host, target.port, target.strip_prefix) == (f"{NAME}.gpuc-user-1.svc", 8000, False)
    app_key = state["secrets"]["app"]
    assert len(app_key) == 48 and target.headers == (("Authorization", f"Bearer {app_key}"),)
    assert backend.entry_points(key=KEY, state=state).web == ("lab", "code", "app")


def test_an_apps_separate_webui_runs_in_a_third_container_without_gpus(api, backend):
    webui = AppLaunch(
        name="chat-webui",
        argv=(
            "/bin/sh",
            "-c",
            "exec env OPENAI_API_BASE_URL=http://127.0.0.1:{port}/v1 PORT={webui_port} bash start.sh",
        ),
        image="ghcr.io/open-webui/open-webui:v0.3.35",
        port=8080,
        serves_base_path=False,
    )
    app = AppLaunch(
        name="chat",
        argv=("vllm", "serve", "m", "--host", "{host}", "--port", "{port}", "--api-key", "$APP_API_KEY"),
        image="vllm/vllm-openai:v0.6.3.post1",
        port=8000,
        webui=webui,
    )
    state = backend.create(key=KEY, spec=spec(app=app))
    containers = {c["name"]: c for c in api.cluster.get("pods", f"{NAME}-0")["spec"]["containers"]}
    assert containers["app"]["args"][3:6] == ["--host", "0.0.0.0", "--port"]  # noqa: S104
    ui = containers["webui"]
    assert ui["image"] == "ghcr.io/open-webui/open-webui:v0.3.35"
    # Open WebUI's own 8080 is code-server's in the pod: it gets a free port, named in its command.
    assert ui["args"][-1] == "exec env OPENAI_API_BASE_URL=http://127.0.0.1:8000/v1 PORT=18080 bash start.sh"
    assert "nvidia.com/gpu" not in ui["resources"]["limits"]
    assert containers["app"]["resources"]["limits"]["nvidia.com/gpu"] == "2"
    ports = {p["name"]: p["port"] for p in api.cluster.get("services", NAME)["spec"]["ports"]}
    assert ports["app"] == 8000 and ports["webui"] == 18080
    api.cluster.advance()
    target = backend.proxy_target(key=KEY, service="webui")
    assert (target.port, target.strip_prefix, target.headers) == (18080, True, ())
    assert backend.entry_points(key=KEY, state=state).web == ("lab", "code", "app", "webui")


def test_an_app_on_a_servers_port_is_refused(backend):
    app = AppLaunch(name="bad", argv=("serve",), image="x", port=8888)
    with pytest.raises(PermanentBackendError, match="8888"):
        backend.create(key=KEY, spec=spec(app=app))


def test_start_with_a_new_spec_replaces_the_app_and_the_service_ports(api, backend):
    state = backend.create(key=KEY, spec=spec())
    backend.stop(key=KEY, state=state)
    app = AppLaunch(name="web", argv=("python", "-m", "http.server", "{port}"), image="python:3.12", port=9000)
    backend.start(key=KEY, state=state, node="gpu-a", spec=spec(app=app))

    containers = [c["name"] for c in api.cluster.get("pods", f"{NAME}-0")["spec"]["containers"]]
    assert containers == ["workspace", "app"]
    assert "app" in {p["name"] for p in api.cluster.get("services", NAME)["spec"]["ports"]}
    backend.stop(key=KEY, state=state)
    backend.start(key=KEY, state=state, node="gpu-a", spec=spec())
    assert [c["name"] for c in api.cluster.get("pods", f"{NAME}-0")["spec"]["containers"]] == ["workspace"]


def test_volumes_are_claims_mounted_by_key_and_grow_but_never_shrink(api, backend):
    volume_key = "0b7e0000-aaaa-4bbb-8ccc-000000000001"
    volume = backend.volume_create(key=volume_key, size_gb=100, owner_ref="user-1")
    assert volume == backend.volume_create(key=volume_key, size_gb=100, owner_ref="user-1")  # 409: the same claim
    assert volume["namespace"] == "gpuc-user-1"  # where its owner's machines can mount it
    assert volume["size_gb"] == 100 and volume["access_mode"] == "ReadWriteOnce"
    assert backend.supports_volumes and not backend.supports_shared_write

    mounts = (VolumeMount(key=volume_key, path="/mnt/data", read_only=True),)
    backend.create(key=KEY, spec=spec(volumes=mounts))
    pod = api.cluster.get("pods", f"{NAME}-0")
    assert {"name": "v0", "persistentVolumeClaim": {"claimName": f"vol-{volume_key}", "readOnly": True}} in pod["spec"][
        "volumes"
    ]
    assert {"name": "v0", "mountPath": "/mnt/data", "readOnly": True} in pod["spec"]["containers"][0]["volumeMounts"]

    assert backend.volume_resize(key=volume_key, state=volume, size_gb=200)["size_gb"] == 200
    assert api.cluster.get("persistentvolumeclaims", f"vol-{volume_key}")["spec"]["resources"]["requests"] == {
        "storage": "200Gi"
    }
    with pytest.raises(PermanentBackendError, match="only grow"):
        backend.volume_resize(key=volume_key, state=volume, size_gb=150)
    assert backend.volume_usage(key=volume_key, state=volume) is None  # kubelet stats are opt-in

    backend.volume_destroy(key=volume_key, state=volume)
    backend.volume_destroy(key=volume_key, state=volume)
    assert api.cluster.get("persistentvolumeclaims", f"vol-{volume_key}") is None


def test_a_missing_volume_is_refused_and_rwx_classes_share_writes(api):
    rwx = backend_for(api, VOLUME_RWX=True, VOLUME_STORAGE_CLASS="cephfs", VOLUME_USAGE_FROM_KUBELET=True)
    mounts = (VolumeMount(key="0b7e0000-aaaa-4bbb-8ccc-000000000009", path="/mnt/x"),)
    with pytest.raises(PermanentBackendError, match="does not exist"):
        rwx.create(key=KEY, spec=spec(volumes=mounts))

    volume = rwx.volume_create(key="0b7e0000-aaaa-4bbb-8ccc-000000000009", size_gb=10, owner_ref="user-1")
    assert rwx.supports_shared_write and volume["access_mode"] == "ReadWriteMany"
    assert api.cluster.get("persistentvolumeclaims", "vol-0b7e0000-aaaa-4bbb-8ccc-000000000009")["spec"][
        "storageClassName"
    ] == ("cephfs")
    rwx.create(key=KEY, spec=spec(volumes=mounts))
    api.cluster.advance()
    api.cluster.volume_usage["vol-0b7e0000-aaaa-4bbb-8ccc-000000000009"] = 123_456
    assert rwx.volume_usage(key="0b7e0000-aaaa-4bbb-8ccc-000000000009", state=volume) == 123_456


def test_nodes_lists_gpu_nodes_with_allocatable_cards_and_health(api, backend):
    api.cluster.add_node("gpu-c", product="NVIDIA-A800-SXM4-80GB", gpus=4)
    api.cluster.add_node("gpu-unknown", product="NVIDIA-B300", gpus=8)  # not in GPU_MODELS: ignored
    api.cluster.node_cordon("gpu-b")

    nodes = {n.name: n for n in backend.nodes()}
    assert set(nodes) == {"gpu-a", "gpu-b", "gpu-c"}
    assert (nodes["gpu-a"].gpu_model, nodes["gpu-a"].cards, nodes["gpu-a"].healthy) == ("h200", 8, True)
    assert nodes["gpu-c"].gpu_model == "a800-80g" and nodes["gpu-c"].region == "k8s-1"
    assert nodes["gpu-b"].healthy is False  # cordoned

    api.cluster.node_set_ready("gpu-a", False)
    assert {n.name: n.healthy for n in backend.nodes()}["gpu-a"] is False


def test_a_node_that_stops_reporting_makes_its_machine_unknown_and_a_deleted_one_gone(api, backend):
    state = backend.create(key=KEY, spec=spec())
    api.cluster.advance()
    assert backend.poll(key=KEY, state=state).state == Observed.RUNNING

    api.cluster.node_set_ready("gpu-a", False)
    observation = backend.poll(key=KEY, state=state)
    assert observation.state == Observed.UNKNOWN  # it may come back: never GONE for that
    assert "gpu-a" in observation.detail
    assert [m.observed for m in backend.machines()] == [Observed.UNKNOWN]

    api.cluster.node_set_ready("gpu-a", True)
    api.cluster.node_delete("gpu-a")  # the pod is collected; its replacement cannot go anywhere else
    observation = backend.poll(key=KEY, state=state)
    assert observation.state == Observed.GONE
    assert observation.detail == "node gpu-a was removed from the cluster"
    assert [m.observed for m in backend.machines()] == [Observed.GONE]


def test_machines_lists_this_backends_statefulsets(api, backend):
    backend.create(key=KEY, spec=spec())
    other_key = "7a000000-0000-4000-8000-000000000003"
    backend.create(key=other_key, spec=spec(node="gpu-b", gpu_count=1))
    backend.stop(key=other_key, state={})
    elsewhere = KubernetesBackend(alias="elsewhere", options={"KUBECONFIG": str(api.kubeconfig), "IMAGES": IMAGES})
    elsewhere.create(key="8b000000-0000-4000-8000-000000000004", spec=spec())

    machines = {m.key: m for m in backend.machines()}
    assert set(machines) == {KEY, other_key}  # not the other backend's
    assert (machines[KEY].node, machines[KEY].cards, machines[KEY].observed) == ("gpu-a", 2, Observed.PENDING)
    assert machines[other_key].observed == Observed.STOPPED


def test_the_api_down_is_unknown_for_poll_and_transient_for_the_rest(api, backend):
    state = backend.create(key=KEY, spec=spec())
    api.stop()

    observation = backend.poll(key=KEY, state=state)
    assert observation.state == Observed.UNKNOWN
    for call in (
        lambda: backend.create(key=OTHER, spec=spec()),
        lambda: backend.stop(key=KEY, state=state),
        lambda: backend.destroy(key=KEY, state=state),
        backend.nodes,
        backend.machines,
    ):
        with pytest.raises(TransientBackendError):
            call()


def test_5xx_and_timeouts_are_transient_and_a_refusal_is_permanent_with_its_message(api, backend):
    api.cluster.fail_next(503)
    with pytest.raises(TransientBackendError, match="503"):
        backend.create(key=KEY, spec=spec())
    api.cluster.fail_next(500)
    assert backend.poll(key=KEY, state={}).state == Observed.UNKNOWN
    # A request the API server refuses as invalid (422) is permanent, with the server's message.
    api.cluster.fail_next(422)
    with pytest.raises(PermanentBackendError, match="Kubernetes refused the request: injected failure"):
        backend.create(key=KEY, spec=spec())

    # The server stops answering until the test lets it go, so the timeout fires however busy the machine
    # is; only the call that is meant to time out runs with a short one.
    impatient = backend_for(api, REQUEST_TIMEOUT_S=0.3)  # wall-clock: the server is held silent, never raced
    api.cluster.answering.clear()
    try:
        with pytest.raises(TransientBackendError, match="did not answer"):
            impatient.nodes()
    finally:
        api.cluster.answering.set()

    # An owner that cannot name a namespace is refused before anything is sent.
    with pytest.raises(PermanentBackendError, match="cannot name a Kubernetes namespace"):
        backend.create(key=KEY, spec=spec(owner_ref="user one"))
    assert api.cluster.names("secrets") == []


def test_wrong_credentials_are_a_plain_permanent_error(api, tmp_path):
    config = api.kubeconfig.read_text().replace("fake-cluster-token", "stolen")
    (tmp_path / "bad").write_text(config)
    backend = KubernetesBackend(alias="k8s", options={"KUBECONFIG": str(tmp_path / "bad")})
    with pytest.raises(PermanentBackendError, match="refused the console"):
        backend.nodes()
    assert backend.poll(key=KEY, state={}).state == Observed.UNKNOWN


def test_every_body_the_backend_sent_was_valid(api, backend):
    state = backend.create(key=KEY, spec=spec(app=AppLaunch(name="a", argv=("a",), image="a:1", port=7000)))
    backend.stop(key=KEY, state=state)
    backend.start(key=KEY, state=state, node="gpu-b", spec=spec(node="gpu-b"))
    backend.restart(key=KEY, state=state, spec=spec(node="gpu-b"))
    # The fake validated each against the schema (and the patched results) and refused none: the
    # tenant's namespace, its RoleBinding and NetworkPolicy, then the machine's four objects.
    assert [r[0] for r in api.cluster.requests].count("create") == 7
    assert [r[0] for r in api.cluster.requests].count("patch") == 5  # scale, pin+scale, service, template, …
    assert api.cluster.refused == []


def test_watch_pods_streams_what_happens_to_the_instances_pods(api, backend):
    events = []
    ready = threading.Event()

    def watch():
        for event in backend.watch_pods(timeout_s=3):
            events.append(event)
            ready.set()
            if event.type == "DELETED":
                return

    state = backend.create(key=KEY, spec=spec())  # one pod exists before the watch: ADDED first
    thread = threading.Thread(target=watch)
    thread.start()
    assert ready.wait(3)
    api.cluster.advance()
    backend.stop(key=KEY, state=state)
    thread.join(5)

    assert events[0].type == "ADDED" and events[0].key == KEY and events[0].pod == f"{NAME}-0"
    running = [e for e in events if e.type == "MODIFIED" and e.ready]
    assert running and running[0].phase == "Running" and running[0].observation.state == Observed.RUNNING
    assert events[-1].type == "DELETED"

    resumed = []
    for event in backend.watch_pods(timeout_s=60, resource_version=events[0].resource_version):
        resumed.append(event)
        if event.type == "DELETED":
            break
    assert [e.type for e in resumed] == [e.type for e in events[1:]]  # resumes after the version given


def test_a_watch_that_cannot_connect_is_transient(api, backend):
    api.stop()
    with pytest.raises(TransientBackendError):
        next(backend.watch_pods(timeout_s=30))


def test_a_nodeport_service_gives_ssh_and_an_out_of_cluster_proxy_target(api):
    backend = backend_for(api, SERVICE_TYPE="NodePort", PROXY_HOST="192.0.2.10", SSH_USER="jovyan")
    state = backend.create(key=KEY, spec=spec())
    node_ports = {p["name"]: p["nodePort"] for p in api.cluster.get("services", NAME)["spec"]["ports"]}

    entry = backend.entry_points(key=KEY, state=state)
    assert (entry.web, entry.ssh_port, entry.ssh_user) == (("lab", "code"), node_ports["ssh"], "jovyan")
    target = backend.proxy_target(key=KEY, service="code")
    assert (target.host, target.port, target.strip_prefix) == ("192.0.2.10", node_ports["code"], True)
    assert target.cookies == (("code-server-session", state["secrets"]["code"]),)


def test_the_ssh_gateway_reaches_the_pods_sshd_through_its_service(api):
    nodeport = backend_for(api, SERVICE_TYPE="NodePort", PROXY_HOST="192.0.2.10", SSH_USER="jovyan")
    nodeport.create(key=KEY, spec=spec())
    node_ports = {p["name"]: p["nodePort"] for p in api.cluster.get("services", NAME)["spec"]["ports"]}
    target = nodeport.ssh_target(key=KEY)
    assert (target.host, target.port, target.user, target.simulated) == (
        "192.0.2.10",
        node_ports["ssh"],
        "jovyan",
        False,
    )


def test_a_clusterip_instance_is_reached_by_the_gateway_on_its_service_name(api, backend):
    backend.create(key=KEY, spec=spec())
    target = backend.ssh_target(key=KEY)
    ports = {p["name"]: p["port"] for p in api.cluster.get("services", NAME)["spec"]["ports"]}
    assert target.port == ports["ssh"] and NAME in target.host
    assert backend.ssh_target(key="0badf00d-0000-4000-8000-000000000000") is None  # no such machine


def test_a_clusterip_service_offers_the_web_servers_but_no_ssh_port(api, backend):
    state = backend.create(key=KEY, spec=spec())
    entry = backend.entry_points(key=KEY, state=state)
    assert (entry.web, entry.ssh_port) == (("lab", "code"), None)
    assert backend.proxy_target(key=KEY, service="app") is None  # no app on this machine
    assert backend.proxy_target(key=KEY, service="shell") is None


def test_a_missing_kubeconfig_or_cluster_is_a_plain_permanent_error(tmp_path, monkeypatch):
    missing = KubernetesBackend(alias="k8s", options={"KUBECONFIG": str(tmp_path / "nowhere")})
    with pytest.raises(PermanentBackendError, match="configuration could not be loaded"):
        missing.nodes()
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    outside = KubernetesBackend(alias="k8s", options={"IN_CLUSTER": True})
    with pytest.raises(PermanentBackendError, match="configuration could not be loaded"):
        outside.nodes()
    assert outside.poll(key=KEY, state={}).state == Observed.UNKNOWN  # never GONE


def test_the_public_models_and_datasets_are_mounted_read_only_unless_a_volume_takes_the_path(api):
    from providers.base import VolumeMount

    backend = backend_for(api, PUBLIC_VOLUMES={"/models": "public-models", "/datasets": "public-datasets"})
    backend.volume_create(key="0b7e11", size_gb=10, owner_ref="user-1")
    backend.create(key=KEY, spec=spec(volumes=(VolumeMount(key="0b7e11", path="/datasets/mine", read_only=True),)))
    pod = api.cluster.get("pods", f"{NAME}-0")["spec"]
    claims = {v["name"]: v.get("persistentVolumeClaim") for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["/models"]["readOnly"] is True
    assert claims[mounts["/models"]["name"]] == {"claimName": "public-models", "readOnly": True}
    # The user's volume at /datasets/mine takes /datasets: a read-only mount cannot hold its mount point.
    assert "/datasets" not in mounts and mounts["/datasets/mine"]["readOnly"] is True


def test_a_process_that_never_saw_the_machine_finds_its_tenants_namespace_for_every_call(api, backend):
    """The proxy, the gateway and the reconciler's leak clean-up ask by key alone: a fresh backend (another
    process) finds each machine in its owner's namespace by its labels, and two tenants stay apart."""
    state = backend.create(key=KEY, spec=spec())
    other = "7a000000-0000-4000-8000-000000000005"
    backend.create(key=other, spec=spec(owner_ref="user-2", node="gpu-b"))
    api.cluster.advance()
    fresh = backend_for(api)
    assert fresh.proxy_target(key=KEY, service="lab").host == f"{NAME}.gpuc-user-1.svc"
    assert fresh.ssh_target(key=other).host == f"{instance_name(other)}.gpuc-user-2.svc"
    machines = {m.key: m.extra["namespace"] for m in fresh.machines()}
    assert machines == {KEY: "gpuc-user-1", other: "gpuc-user-2"}
    events = {e.key for e in fresh.watch_pods(timeout_s=1)}  # wall-clock: the first events are the pods that exist
    assert events == {KEY, other}

    # A leaked machine (no state: the reconciler's) is deleted in its own namespace; the namespace stays.
    backend_for(api).destroy(key=other, state={})
    assert api.cluster.list("statefulsets")[0]["metadata"]["labels"]["console.gpu/instance"] == KEY
    assert api.cluster.get("namespaces", "gpuc-user-2") is not None
    assert backend_for(api).poll(key=other, state={}).state == Observed.GONE
    assert fresh.poll(key=KEY, state=state).state == Observed.RUNNING


def test_a_namespace_of_that_name_that_is_not_the_tenants_is_refused(api, backend):
    api.cluster.add_namespace("gpuc-user-1", labels={"team": "someone-elses"})
    with pytest.raises(PermanentBackendError, match="not this tenant's"):
        backend.create(key=KEY, spec=spec())
    assert api.cluster.list("statefulsets") == []


def test_a_tenants_namespace_deleted_by_hand_is_made_again_fenced_on_the_retry(api, backend):
    backend.create(key=KEY, spec=spec())
    with api.cluster.lock:  # an administrator deletes the namespace (and, with it, everything in it)
        for key in [k for k in api.cluster.objects if k[1] == "gpuc-user-1" or k == ("namespaces", "", "gpuc-user-1")]:
            api.cluster.objects.pop(key)
    with pytest.raises(TransientBackendError, match="gpuc-user-1 is missing"):
        backend.create(key=KEY, spec=spec())
    backend.create(key=KEY, spec=spec())  # the task's retry
    assert api.cluster.get("networkpolicies", "tenant-fence", "gpuc-user-1") is not None
    assert api.cluster.get("statefulsets", NAME, "gpuc-user-1") is not None
