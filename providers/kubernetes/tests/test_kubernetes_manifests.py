"""Every kind of object the Kubernetes backend sends is valid against the Kubernetes OpenAPI schema
(``kubernetes-validate``, strict, offline), and a broken one is not: the check can fail."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from providers.base import AppLaunch, InstanceSpec, PermanentBackendError, VolumeMount
from providers.kubernetes import (
    KubeOptions,
    cluster_manifests,
    home_pvc_manifest,
    pod_template,
    secret_manifest,
    service_manifest,
    statefulset_manifest,
    volume_pvc_manifest,
)
from providers.kubernetes.tests.k8s_fake import IMAGES_OPTION, restricted_violations, validate_manifest

KEY = "6f1c2a9b-03de-4f00-9000-000000000001"
APP = AppLaunch(
    name="vllm",
    argv=("vllm", "serve", "m", "--port", "{port}"),
    image="vllm/vllm-openai:v0.9.0",
    port=8000,
    env=(("A", "1"),),
    health_path="/health",
    serves_base_path=False,
)
SPEC = InstanceSpec(
    node="gpu-a",
    gpu_model="h200",
    gpu_count=8,
    image="pytorch-2.5-cu124",
    disk_gb=200,
    ssh_public_keys=("ssh-ed25519 AAAA a@b",),
    owner_ref="user-7",
    app=APP,
    volumes=(VolumeMount(key="0b7e0000-aaaa-4bbb-8ccc-000000000001", path="/data", read_only=True),),
)
OPTS = KubeOptions(
    namespace="gpu-console",
    region="k8s-1",
    storage_class="fast-ssd",
    volume_rwx=True,
    cpu_per_gpu="12",
    memory_per_gpu="96Gi",
    image_pull_secrets=("registry-cred",),
    images=IMAGES_OPTION,
)


def instance_manifests(opts: KubeOptions = OPTS, spec: InstanceSpec = SPEC) -> list[dict]:
    tokens = {"lab": "t" * 48, "code": "c" * 64}
    return [
        statefulset_manifest(opts, alias="k8s", key=KEY, spec=spec),
        service_manifest(opts, alias="k8s", key=KEY, spec=spec),
        secret_manifest(opts, alias="k8s", key=KEY, spec=spec, tokens=tokens),
        home_pvc_manifest(opts, alias="k8s", key=KEY, spec=spec),
        volume_pvc_manifest(
            opts, alias="k8s", key="0b7e0000-aaaa-4bbb-8ccc-000000000001", size_gb=500, owner_ref=spec.owner_ref
        ),
    ]


CLUSTER_SPEC = InstanceSpec(
    node="",
    gpu_model="h200",
    gpu_count=8,
    image="pytorch-2.5-cu124",
    disk_gb=100,
    ssh_public_keys=("ssh-ed25519 AAAA a@b",),
    owner_ref="user-7",
    volumes=(VolumeMount(key="0b7e0000-aaaa-4bbb-8ccc-000000000001", path="/data"),),
    nodes=4,
)


def cluster(gang: str = "", spec: InstanceSpec = CLUSTER_SPEC, **changes) -> list[dict]:
    opts = KubeOptions(
        namespace="gpu-console",
        gang_scheduling=gang,
        kueue_queue="team-a" if gang == "kueue" else "",
        public_volumes=(("/models", "public-models"),),
        images=IMAGES_OPTION,
        **changes,
    )
    return cluster_manifests(
        opts,
        alias="k8s",
        key=KEY,
        spec=spec,
        nodes=4,
        gpus_per_node=8,
        image="nvcr.io/nvidia/pytorch:25.01-py3",
        command=("torchrun", "--nnodes=4", "train.py"),
        env=(("NCCL_DEBUG", "INFO"),),
    )


@pytest.mark.parametrize(
    "manifest",
    [
        *instance_manifests(),
        *instance_manifests(
            KubeOptions(namespace="n", pin_to_node=False, images=IMAGES_OPTION),
            InstanceSpec("", "rtx-4090", 1, "x", 20, owner_ref="user-8"),
        ),
        *cluster(""),
        *cluster("kueue"),
        *cluster("coscheduling"),
        *cluster("coscheduling", spec=SPEC, image_pull_secrets=("registry-cred",)),
    ],
    ids=lambda m: f"{m['kind']}-{m['metadata']['name']}",
)
def test_each_manifest_the_backend_sends_is_valid(manifest):
    validate_manifest(manifest)


def test_every_kind_is_covered():
    kinds = {m["kind"] for m in instance_manifests() + cluster("coscheduling")}
    assert kinds == {"StatefulSet", "Service", "Secret", "PersistentVolumeClaim", "Job", "PodGroup"}


@pytest.mark.parametrize(
    "breakage",
    [
        lambda m: m["spec"].update(replicas="one"),  # a type error
        lambda m: m["spec"]["template"]["spec"]["containers"][0].update(gpus=8),  # an unknown field
        lambda m: m["spec"]["template"]["spec"]["containers"][0].pop("name"),  # a required field
        lambda m: m["metadata"].update(name="Inst_Bad"),  # not a DNS name
        lambda m: m["metadata"]["labels"].update({"console.gpu/owner": "user one"}),  # not a label value
        lambda m: m["spec"]["selector"]["matchLabels"].update({"console.gpu/instance": "someone-else"}),
        lambda m: m["spec"]["template"]["spec"]["containers"][1]["resources"]["requests"].update(
            {"nvidia.com/gpu": "4"}
        ),  # GPUs cannot be overcommitted
    ],
)
def test_a_broken_manifest_fails_validation(breakage):
    manifest = copy.deepcopy(instance_manifests()[0])
    breakage(manifest)
    with pytest.raises(ValueError):
        validate_manifest(manifest)


def test_a_broken_pod_group_fails_validation():
    group = copy.deepcopy(cluster("coscheduling")[1])
    group["spec"]["minMember"] = 0
    with pytest.raises(ValueError):
        validate_manifest(group)


def test_the_pod_requests_its_gpus_and_resources_and_is_placed_by_gpu_model_and_node():
    pod = instance_manifests()[0]["spec"]["template"]["spec"]
    app = next(c for c in pod["containers"] if c["name"] == "app")
    assert app["resources"] == {
        "requests": {"nvidia.com/gpu": "8", "cpu": "96", "memory": "768Gi", "ephemeral-storage": "10Gi"},
        "limits": {"nvidia.com/gpu": "8", "cpu": "96", "memory": "768Gi", "ephemeral-storage": "200Gi"},
    }
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H200"}
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-a"]}]}]
    assert pod["imagePullSecrets"] == [{"name": "registry-cred"}]
    assert app["readinessProbe"]["httpGet"] == {"path": "/health", "port": 8000}  # the proxy strips the prefix

    loose = statefulset_manifest(
        KubeOptions(
            namespace="n",
            pin_to_node=False,
            gpu_label="example.com/gpu",
            gpu_models=(("h200", "H200"),),
            images=IMAGES_OPTION,
        ),
        alias="k8s",
        key=KEY,
        spec=SPEC,
    )["spec"]["template"]["spec"]
    assert "affinity" not in loose and loose["nodeSelector"] == {"example.com/gpu": "H200"}


def test_images_map_from_slugs_and_an_unknown_one_is_refused_by_name_never_replaced():
    opts = KubeOptions(images=(("pytorch-2.5-cu124", "registry.local/pytorch:2.5.1-cuda12.4"),))
    plain = InstanceSpec("n", "h200", 1, "pytorch-2.5-cu124", 20, owner_ref="user-7")
    assert statefulset_manifest(opts, alias="k", key=KEY, spec=plain)["spec"]["template"]["spec"]["containers"][0][
        "image"
    ] == ("registry.local/pytorch:2.5.1-cuda12.4")
    other = InstanceSpec("n", "h200", 1, "jax-0.4-cu124", 20, owner_ref="user-7")
    with pytest.raises(PermanentBackendError, match=r"'jax-0\.4-cu124' is not available"):
        statefulset_manifest(opts, alias="k", key=KEY, spec=other)
    # A cluster's workers too, and the option that used to stand in for any image is not read.
    with pytest.raises(PermanentBackendError, match=r"jax-0\.4-cu124"):
        cluster_manifests(
            opts, alias="k", key=KEY, spec=replace(other, nodes=2), nodes=2, gpus_per_node=1, command=("x",)
        )
    assert not hasattr(KubeOptions.from_options({"DEFAULT_IMAGE": "any:1"}, namespace="n", alias="a"), "default_image")


def test_a_cluster_is_a_head_and_an_indexed_job_of_workers_that_find_each_other():
    service, head, job = cluster("")
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 3, 3)
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == service["metadata"]["name"]
    worker = pod["containers"][0]
    env = {e["name"]: e.get("value") for e in worker["env"]}
    # The head's pod is <statefulset>-0 under the headless Service (its serviceName).
    assert head["spec"]["serviceName"] == service["metadata"]["name"]
    assert env["MASTER_ADDR"] == f"{head['metadata']['name']}-0.{service['metadata']['name']}"
    assert worker["resources"]["limits"] == {"nvidia.com/gpu": "8", "ephemeral-storage": "100Gi"}
    # Workers' ranks are 1..3: the Job's index plus one, computed by the shell, the command's argv intact.
    assert worker["command"][:2] == ["/bin/sh", "-c"] and "JOB_COMPLETION_INDEX + 1" in worker["command"][2]
    assert worker["args"] == ["torchrun", "--nnodes=4", "train.py"]
    # Every pod has the user's volume and the public claim; only the head has the home disk.
    claims = {v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
    assert claims == {"vol-0b7e0000-aaaa-4bbb-8ccc-000000000001", "public-models"}
    head_pod = head["spec"]["template"]["spec"]
    head_claims = {v["persistentVolumeClaim"]["claimName"] for v in head_pod["volumes"] if "persistentVolumeClaim" in v}
    assert head_claims == claims | {"inst-6f1c2a9b03de-home"}
    workspace = head_pod["containers"][0]
    assert workspace["name"] == "workspace" and workspace["resources"]["limits"]["nvidia.com/gpu"] == "8"
    head_env = {e["name"]: e.get("value") for e in workspace["env"]}
    assert (head_env["NODE_RANK"], head_env["NNODES"], head_env["MASTER_ADDR"]) == ("0", "4", env["MASTER_ADDR"])
    # Both carry the cluster's label (the headless Service's selector); only the head the instance's.
    head_labels = head["spec"]["template"]["metadata"]["labels"]
    worker_labels = spec["template"]["metadata"]["labels"]
    assert head_labels["console.gpu/cluster"] == worker_labels["console.gpu/cluster"] == KEY
    assert head_labels["console.gpu/instance"] == KEY and "console.gpu/instance" not in worker_labels
    # Neither gang scheduler: nothing asks for one, so the pods may start partially (see cluster_poll).
    assert "suspend" not in spec and "schedulerName" not in pod
    assert "kueue.x-k8s.io/queue-name" not in job["metadata"]["labels"]


def test_with_kueue_the_job_is_queued_suspended():
    _service, _head, job = cluster("kueue")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert job["spec"]["suspend"] is True


def test_with_coscheduling_a_pod_group_holds_all_the_pods():
    _service, group, head, job = cluster("coscheduling")
    assert group["kind"] == "PodGroup" and group["spec"]["minMember"] == 4
    for pod in (job["spec"]["template"], head["spec"]["template"]):  # the head is one of the four
        assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == group["metadata"]["name"]
        assert pod["spec"]["schedulerName"] == "scheduler-plugins-scheduler"


def test_a_clusters_app_runs_on_the_head_behind_the_proxy_and_on_every_worker():
    app_spec = InstanceSpec(
        node="", gpu_model="h200", gpu_count=8, image="x", disk_gb=50, app=APP, nodes=2, owner_ref="user-7"
    )
    _service, head, job = cluster_manifests(
        KubeOptions(namespace="gpu-console", images=IMAGES_OPTION),
        alias="k8s",
        key=KEY,
        spec=app_spec,
        nodes=2,
        gpus_per_node=8,
        image=APP.image,
        command=APP.argv,  # what the backend runs on a cluster with an app
        env=APP.env,
    )
    containers = {c["name"]: c for c in head["spec"]["template"]["spec"]["containers"]}
    assert "nvidia.com/gpu" not in containers["workspace"].get("resources", {}).get("limits", {})
    assert containers["app"]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert containers["app"]["args"] == ["vllm", "serve", "m", "--port", "8000"]
    assert {"name": "NODE_RANK", "value": "0"} in containers["app"]["env"]
    # The workers run the command with the app's placeholders filled as on the head.
    worker = job["spec"]["template"]["spec"]["containers"][0]
    assert worker["args"] == ["vllm", "serve", "m", "--port", "8000"] and worker["image"] == APP.image


def test_bad_options_and_specs_are_refused_plainly():
    with pytest.raises(PermanentBackendError, match="KUEUE_QUEUE"):
        KubeOptions.from_options({"GANG_SCHEDULING": "kueue"}, namespace="n", alias="a")
    with pytest.raises(PermanentBackendError, match="GANG_SCHEDULING"):
        KubeOptions.from_options({"GANG_SCHEDULING": "volcano"}, namespace="n", alias="a")
    with pytest.raises(PermanentBackendError, match="SERVICES"):
        KubeOptions.from_options({"SERVICES": ["lab", "rdp"]}, namespace="n", alias="a")
    with pytest.raises(PermanentBackendError, match="command"):
        cluster_manifests(OPTS, alias="k", key=KEY, spec=CLUSTER_SPEC, nodes=2, gpus_per_node=8, command=())
    with pytest.raises(PermanentBackendError, match="two nodes"):
        cluster_manifests(OPTS, alias="k", key=KEY, spec=CLUSTER_SPEC, nodes=1, gpus_per_node=8, command=("x",))


def test_every_container_runs_as_the_image_user_without_privilege_and_the_pod_meets_restricted():
    for pod in (
        instance_manifests()[0]["spec"]["template"]["spec"],  # a deployment: workspace and app
        *(m["spec"]["template"]["spec"] for m in cluster("") if m["kind"] in ("StatefulSet", "Job")),
    ):
        assert restricted_violations(pod) == []
        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"] == {
            "runAsNonRoot": True,
            "runAsUser": 1000,
            "runAsGroup": 1000,
            "fsGroup": 1000,
            "fsGroupChangePolicy": "OnRootMismatch",
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        for container in pod["containers"]:
            context = container["securityContext"]
            assert (context["runAsUser"], context["allowPrivilegeEscalation"]) == (1000, False)
            assert context["capabilities"] == {"drop": ["ALL"]}  # sshd too: it never switches users
            assert "limits" in container["resources"] and "requests" in container["resources"]
            assert not [e for e in container.get("env", []) if "valueFrom" in e]  # no secret in the environment
        run = next(v for v in pod["volumes"] if v["name"] == "run")
        workspace = next((c for c in pod["containers"] if c["name"] == "workspace"), None)
        if workspace is not None:  # under the image's tini when it has one (the contract's PID 1)
            assert workspace["command"][:4] == ["/bin/sh", "-c", workspace["command"][2], "console-init"]
            assert "exec tini -s --" in workspace["command"][2]
        assert run["emptyDir"]["medium"] == "Memory"


def test_the_restricted_check_can_fail():
    pod = copy.deepcopy(instance_manifests()[0]["spec"]["template"]["spec"])
    pod["containers"][0]["securityContext"]["capabilities"]["add"] = ["SYS_ADMIN"]
    pod["securityContext"]["runAsUser"] = 0
    del pod["containers"][1]["securityContext"]["allowPrivilegeEscalation"]
    assert len(restricted_violations(pod)) == 2  # the added capability, the escalation (runAsUser: per container)
    pod["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
    assert any("hostPath" in v for v in restricted_violations(pod))


def test_cpu_and_memory_come_from_the_catalogue_and_the_disk_bounds_the_writable_layer():
    spec = InstanceSpec("n", "h200", 2, "x", 80, owner_ref="user-7", cpus=32, memory_gb=400)
    workspace = pod_template(KubeOptions(images=IMAGES_OPTION), alias="k", key=KEY, spec=spec)["spec"]["containers"][0]
    assert workspace["resources"] == {
        "requests": {"nvidia.com/gpu": "2", "cpu": "32", "memory": "400Gi", "ephemeral-storage": "10Gi"},
        "limits": {"nvidia.com/gpu": "2", "cpu": "32", "memory": "400Gi", "ephemeral-storage": "80Gi"},
    }


def test_the_tenant_namespace_is_named_once_from_the_owner_and_refuses_what_could_collide():
    from providers.kubernetes.names import tenant_namespace

    assert tenant_namespace("user-42") == "gpuc-user-42"
    assert KubeOptions(tenant_namespace_prefix="t-").tenant_namespace("user-42") == "t-user-42"
    for bad in ("", "User-42", "user_42", "user 42", "u" * 60):
        with pytest.raises(PermanentBackendError):
            tenant_namespace(bad)
    # Every object of a machine goes to its owner's namespace, never the console's.
    assert {m["metadata"]["namespace"] for m in instance_manifests()} == {"gpuc-user-7"}
    assert {m["metadata"]["namespace"] for m in cluster("coscheduling")} == {"gpuc-user-7"}


def test_the_tenants_namespace_enforces_restricted_and_every_object_of_it_is_valid():
    from providers.kubernetes.manifests import tenant_manifests

    made = tenant_manifests(
        KubeOptions(namespace="gpu-console", tenant_quota=(("requests.nvidia.com/gpu", "16"),)), owner_ref="user-7"
    )
    assert [m["kind"] for m in made] == ["Namespace", "RoleBinding", "NetworkPolicy", "ResourceQuota"]
    for manifest in made:
        validate_manifest(manifest)
    labels = made[0]["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert labels["console.gpu/tenant"] == "user-7"


def test_a_machine_without_gpu_asks_for_no_cards_and_sees_none():
    spec = replace(SPEC, gpu_count=0, cpus=0.5, memory_gb=2)
    pod = instance_manifests(spec=spec)[0]["spec"]["template"]["spec"]
    app = next(c for c in pod["containers"] if c["name"] == "app")
    assert app["resources"]["limits"] == {"cpu": "0.5", "memory": "2Gi", "ephemeral-storage": "200Gi"}
    assert "nvidia.com/gpu" not in app["resources"]["requests"]
    for container in pod["containers"]:
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        if container["name"] in ("app", "workspace"):
            assert env["NVIDIA_VISIBLE_DEVICES"] == "void"
    validate_manifest(instance_manifests(spec=spec)[0])
    with_cards = next(
        c for c in instance_manifests()[0]["spec"]["template"]["spec"]["containers"] if c["name"] == "app"
    )
    assert "NVIDIA_VISIBLE_DEVICES" not in {e["name"] for e in with_cards["env"]}
