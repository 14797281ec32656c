"""A Kubernetes namespace as a provider: an instance is a StatefulSet of one GPU pod.

What each console object is in the cluster (all in one namespace, all labelled
``app.kubernetes.io/managed-by=gpu-console``, ``console.gpu/backend=<alias>`` and
``console.gpu/instance=<key>``)::

    instance key 6f1c…   StatefulSet  inst-6f1c2a9b03de   replicas 1 (running) or 0 (stopped)
                         Pod          inst-6f1c2a9b03de-0 requests and limits nvidia.com/gpu: N,
                                      nodeSelector <GPU_LABEL>: <GPU_MODELS[slug]>, pinned to the
                                      node the console placed it on (PIN_TO_NODE)
                         PVC          inst-6f1c2a9b03de-home   its disk, mounted at DISK_PATH
                         Service      inst-6f1c2a9b03de   ClusterIP: lab 8888, code 8080, ssh 22,
                                      app <spec.app.port>
                         Secret       inst-6f1c2a9b03de-secrets   the Jupyter token, code-server's
                                      password hash, the SSH keys (read by the pod as env and files)
    volume key 0b7e…     PVC          vol-0b7e…   ReadWriteMany when VOLUME_RWX, else ReadWriteOnce

A StatefulSet (not a bare pod, not a Deployment) because it gives the pod a stable name and lets
``stop`` scale it to zero while the disk, the Secret and the Service stay; ``start`` scales it back
to one. ``release`` deletes all four. The disk is a separate PVC rather than a volumeClaimTemplate
so its life is explicit: a template's PVC outlives the StatefulSet silently and cannot be resized
through it.

A multi-node cluster of N nodes × G GPUs (``cluster_manifests``) is a head and N-1 workers::

    instance key 6f1c…   StatefulSet  inst-6f1c2a9b03de   the head (rank 0): the same pod as a single
                                      machine's (workspace, home disk, app), replicas 1 or 0 (stopped),
                                      also labelled console.gpu/cluster=<key>, not pinned to a node
                         PVC, Service, Secret   inst-6f1c2a9b03de-home, inst-6f1c2a9b03de, …-secrets,
                                      as a single machine's; the Service selects console.gpu/instance,
                                      which only the head carries, so the proxy and SSH reach the head
                         Job          clu-6f1c2a9b03de   Indexed, N-1 pods of G GPUs (ranks 1…N-1),
                                      running the app's command or CLUSTER_COMMAND; no home disk
                         Service      clu-6f1c2a9b03de   headless, selects console.gpu/cluster: every
                                      rank; the head is MASTER_ADDR = inst-6f1c2a9b03de-0.clu-6f1c2a9b03de

Why the head is a StatefulSet of its own and not index 0 of the Job: all pods of an Indexed Job share
one template, so a home disk there would be mounted by every pod, and a ReadWriteOnce disk (what most
storage classes give) attaches on one node only: the other ranks would never start. The head's
StatefulSet mounts it alone, keeps it across a stop (scaled to zero, as a single machine) and gives
the head a stable DNS name under the headless Service. The user's volumes (``spec.volumes``) and the
public claims are mounted in every pod, head and workers; a volume mounted read-write by a cluster
must be ReadWriteMany (``VOLUME_RWX``), else the launch is refused (``PermanentBackendError``), since
a ReadWriteOnce claim would attach on one node only. (Read-only, a ReadWriteOnce claim is mounted on
every node: storage that attaches a disk to one node at a time, block storage, refuses the second
node; file storage such as NFS or CephFS allows it.)

The GPUs of the head go to the container that runs rank 0: the app's, when the instance runs one
(its command on the head, the same command with ``NODE_RANK`` = index + 1 on the workers), else the
workspace's, where the user starts rank 0 from JupyterLab, VS Code or SSH (``torchrun
--node-rank=$NODE_RANK --master-addr=$MASTER_ADDR …``; ``NNODES``, ``GPUS_PER_NODE``, ``MASTER_ADDR``,
``MASTER_PORT`` and ``NODE_RANK=0`` are in its env). Pods start together only where the cluster has
gang scheduling:

- ``GANG_SCHEDULING: "kueue"`` — the workers' Job carries ``kueue.x-k8s.io/queue-name:
  <KUEUE_QUEUE>`` and is created suspended; Kueue admits (unsuspends) it when the whole quota fits,
  so all N-1 workers are created at once. The head is outside the queue, placed as a single machine
  is; until the Job is admitted the cluster is PENDING ("queued") and the head holds its cards.
- ``GANG_SCHEDULING: "coscheduling"`` — a scheduler-plugins ``PodGroup`` with ``minMember: N`` and
  every pod, head included, labelled ``scheduling.x-k8s.io/pod-group`` and run by that scheduler
  (``COSCHEDULING_SCHEDULER``), which binds none of them until all N fit.
- neither (the default) — the pods are scheduled one by one: some may run while others wait for
  GPUs, holding their cards meanwhile. ``cluster_poll`` reports PENDING ("2 of 4 pods running")
  until every pod runs, so the console never calls a half-started cluster running.

Every call may be repeated: creating what exists (409 AlreadyExists) returns what is there;
deleting what is gone (404) is done. The API answering 5xx, 429 or not at all raises
``TransientBackendError`` (and ``poll`` says UNKNOWN, never GONE); a request it refuses as invalid
raises ``PermanentBackendError`` with the API server's own message.

Configuration (``PROVISIONING_BACKENDS[alias]["OPTIONS"]``; see the README, "Kubernetes backend")::

    "KUBECONFIG": "/etc/console/kubeconfig",   # default: $KUBECONFIG or ~/.kube/config
    "CONTEXT": "",                             # default: the kubeconfig's current context
    "IN_CLUSTER": False,                       # True: the console runs in a pod (service account)
    "NAMESPACE": "gpu-console",                # default: the context's namespace, else "default"
    "REGION": "k8s-1", "REGION_NAME": "…",     # the console region this cluster is
    "GPU_LABEL": "nvidia.com/gpu.product",     # the node label that names a node's GPU model
    "GPU_MODELS": {"h200": "NVIDIA-H200"},     # console GPU slug -> that label's value
    "IMAGES": {"pytorch-2.5-cu124": "registry/pytorch:2.5"},  # console image slug -> container image
    "DEFAULT_IMAGE": "quay.io/jupyter/pytorch-notebook:cuda12-latest",
    "STORAGE_CLASS": "", "VOLUME_STORAGE_CLASS": "", "VOLUME_RWX": False,
    "PUBLIC_VOLUMES": {"/models": "public-models"},  # ReadOnlyMany claims mounted read-only in every pod
    "SERVICES": ["lab", "code", "ssh"],        # what the workspace container starts
    "PIN_TO_NODE": True, "SERVICE_TYPE": "ClusterIP",  # NodePort: SSH and an out-of-cluster proxy
    "SSH_USER": "root",                        # the user the image's sshd logs in (NodePort/LoadBalancer)
    "PROXY_HOST": "{service}.{namespace}.svc", # where the console's proxy reaches a Service
    "GANG_SCHEDULING": "", "KUEUE_QUEUE": "", "COSCHEDULING_SCHEDULER": "scheduler-plugins-scheduler",
    "REQUEST_TIMEOUT_S": 10,
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from instances.backends.base import (
    EntryPoints,
    InstanceSpec,
    MachineInfo,
    NodeInfo,
    Observation,
    Observed,
    PermanentBackendError,
    ProvisioningBackend,
    TransientBackendError,
)

logger = logging.getLogger(__name__)

STATE_VERSION = 1
MANAGED_BY = "gpu-console"
LABEL_MANAGED = "app.kubernetes.io/managed-by"
LABEL_BACKEND = "console.gpu/backend"
LABEL_INSTANCE = "console.gpu/instance"
LABEL_OWNER = "console.gpu/owner"
LABEL_VOLUME = "console.gpu/volume"
LABEL_CLUSTER = "console.gpu/cluster"
ANNOTATION_STOPPED = "console.gpu/stopped"  # on a cluster's Service: its Job was deleted by a stop
ANNOTATION_NODE = "console.gpu/node"
ANNOTATION_GPUS = "console.gpu/gpus"
ANNOTATION_APP_BASE = "console.gpu/app-serves-base-path"
ANNOTATION_WEBUI_BASE = "console.gpu/webui-serves-base-path"
GPU_RESOURCE = "nvidia.com/gpu"
KUEUE_LABEL = "kueue.x-k8s.io/queue-name"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
JOB_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"

LAB, CODE, SSH, APP, WEBUI = "lab", "code", "ssh", "app", "webui"
# Ports inside the pod; sshd listens on 2222 so an image that runs as a user can start it too.
CONTAINER_PORTS = {LAB: 8888, CODE: 8080, SSH: 2222}
SERVICE_PORTS = {LAB: 8888, CODE: 8080, SSH: 22}
CODE_SERVER_COOKIE = "code-server-session"
FILES_MOUNT = "/etc/console"

DEFAULT_GPU_MODELS = {
    # Values as NVIDIA's GPU Feature Discovery writes nvidia.com/gpu.product (spaces become dashes).
    "h200": "NVIDIA-H200",
    "h800": "NVIDIA-H800",
    "a800-80g": "NVIDIA-A800-SXM4-80GB",
    "a100-40g": "NVIDIA-A100-SXM4-40GB",
    "l40s": "NVIDIA-L40S",
    "rtx-4090": "NVIDIA-GeForce-RTX-4090",
    "rtx-3090": "NVIDIA-GeForce-RTX-3090",
}
DEFAULT_IMAGE = "quay.io/jupyter/pytorch-notebook:cuda12-latest"

# The workspace container's start command: start whichever of the configured servers the image has,
# and exit when one of them dies, so the kubelet restarts the container and a server that keeps dying
# shows as CrashLoopBackOff (poll: DEGRADED) instead of a pod that looks fine with nothing inside.
# Secrets never reach argv: Jupyter reads its token from the environment (its config file, mounted
# from the Secret, pops it so kernels never inherit it); code-server reads HASHED_PASSWORD.
WORKSPACE_SCRIPT = r"""
home="${CONSOLE_HOME:-/workspace}"
mkdir -p "$home" 2>/dev/null
pids=""
want() { case " $CONSOLE_SERVICES " in *" $1 "*) return 0;; esac; return 1; }
if want lab; then
  if command -v jupyter >/dev/null 2>&1; then
    jupyter lab --no-browser --allow-root --ServerApp.ip=0.0.0.0 --ServerApp.port=8888 \
      --ServerApp.port_retries=0 "--ServerApp.base_url=$CONSOLE_LAB_BASE_URL" \
      "--ServerApp.root_dir=$home" --ServerApp.allow_remote_access=True \
      --LabApp.news_url= --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate \
      --config=/etc/console/jupyter_server_config.py &
    pids="$pids $!"
  else echo "console: this image has no jupyter; JupyterLab is off" >&2; fi
fi
if want code; then
  if command -v code-server >/dev/null 2>&1; then
    code-server --bind-addr 0.0.0.0:8080 --auth password --disable-telemetry \
      --disable-update-check --disable-workspace-trust "$home" &
    pids="$pids $!"
  else echo "console: this image has no code-server; VS Code is off" >&2; fi
fi
if want ssh; then
  sshd_bin="$(command -v sshd || echo /usr/sbin/sshd)"
  if [ -x "$sshd_bin" ]; then
    mkdir -p /tmp/console-ssh /run/sshd 2>/dev/null
    [ -f /tmp/console-ssh/host_key ] || ssh-keygen -q -t ed25519 -N '' -f /tmp/console-ssh/host_key
    "$sshd_bin" -D -e -p 2222 -h /tmp/console-ssh/host_key \
      -o AuthorizedKeysFile=/etc/console/authorized_keys -o PasswordAuthentication=no \
      -o KbdInteractiveAuthentication=no -o StrictModes=no &
    pids="$pids $!"
  else echo "console: this image has no sshd; SSH is off" >&2; fi
fi
if [ -z "$pids" ]; then echo "console: none of the servers ($CONSOLE_SERVICES) is in this image" >&2; exit 1; fi
while :; do
  for p in $pids; do kill -0 "$p" 2>/dev/null || { echo "console: a server (pid $p) exited" >&2; exit 1; }; done
  sleep 5
done
"""

# The same Jupyter config the local runtime writes (instances.local.servers.JUPYTER_CONFIG).
JUPYTER_CONFIG = """# Written by the console's Kubernetes backend.
import os

c.IdentityProvider.token = os.environ.pop("JUPYTER_TOKEN", "")


def _without_token(handler, page_config):
    page_config["token"] = ""
    return page_config


c.ServerApp.tornado_settings = {"page_config_hook": _without_token}
"""

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_WAITING_BROKEN = {"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError"}


# --- names --------------------------------------------------------------------------------------------


def instance_name(key: str) -> str:
    """``inst-`` and the key's first 12 hex digits: a DNS label that starts with a letter (Service
    names must), short enough for the pod name and the controller's revision label to fit 63 characters.
    The full key is in the labels; a clash of the 12 digits is detected, never silently shared."""
    digits = re.sub(r"[^0-9a-f]", "", key.lower())
    if len(digits) < 12:
        raise PermanentBackendError(f"The instance key {key!r} is not a UUID.")
    return f"inst-{digits[:12]}"


def volume_name(key: str) -> str:
    name = f"vol-{key.lower()}"
    if len(name) > 63 or not _DNS_LABEL.match(name):
        raise PermanentBackendError(f"The volume key {key!r} cannot name a Kubernetes volume claim.")
    return name


def cluster_name(key: str) -> str:
    return "clu-" + instance_name(key)[len("inst-") :]


# --- options --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KubeOptions:
    """The backend's OPTIONS, read once, with their defaults."""

    namespace: str = "default"
    region: str = ""
    gpu_label: str = "nvidia.com/gpu.product"
    gpu_models: tuple[tuple[str, str], ...] = tuple(DEFAULT_GPU_MODELS.items())
    images: tuple[tuple[str, str], ...] = ()
    default_image: str = DEFAULT_IMAGE
    storage_class: str = ""
    volume_storage_class: str = ""
    volume_rwx: bool = False
    services: tuple[str, ...] = (LAB, CODE, SSH)
    pin_to_node: bool = True
    service_type: str = "ClusterIP"
    proxy_host: str = "{service}.{namespace}.svc"
    proxy_prefix: str = "/i/"
    disk_path: str = "/workspace"
    gang_scheduling: str = ""
    kueue_queue: str = ""
    coscheduling_scheduler: str = "scheduler-plugins-scheduler"
    image_pull_secrets: tuple[str, ...] = ()
    cpu_per_gpu: str = ""
    memory_per_gpu: str = ""
    request_timeout_s: float = 10.0
    ssh_user: str = "root"
    volume_usage_from_kubelet: bool = False
    # Claims holding the public models and datasets (ReadOnlyMany), mounted read-only in every pod at
    # the catalogues' paths: ``{"/models": "public-models", "/datasets": "public-datasets"}``.
    public_volumes: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_options(cls, options: dict, *, namespace: str, alias: str) -> KubeOptions:
        gang = (options.get("GANG_SCHEDULING") or ("kueue" if options.get("KUEUE_QUEUE") else "")).lower()
        if gang not in ("", "kueue", "coscheduling"):
            raise PermanentBackendError(f"GANG_SCHEDULING must be kueue, coscheduling or empty, not {gang!r}.")
        if gang == "kueue" and not options.get("KUEUE_QUEUE"):
            raise PermanentBackendError("GANG_SCHEDULING kueue needs KUEUE_QUEUE (a LocalQueue's name).")
        services = tuple(options.get("SERVICES", (LAB, CODE, SSH)))
        unknown = [s for s in services if s not in CONTAINER_PORTS]
        if unknown:
            raise PermanentBackendError(f"SERVICES may name lab, code and ssh, not {', '.join(unknown)}.")
        return cls(
            namespace=namespace,
            region=options.get("REGION") or alias,
            gpu_label=options.get("GPU_LABEL", cls.gpu_label),
            gpu_models=tuple((options.get("GPU_MODELS") or DEFAULT_GPU_MODELS).items()),
            images=tuple((options.get("IMAGES") or {}).items()),
            default_image=options.get("DEFAULT_IMAGE", DEFAULT_IMAGE),
            storage_class=options.get("STORAGE_CLASS", ""),
            volume_storage_class=options.get("VOLUME_STORAGE_CLASS", options.get("STORAGE_CLASS", "")),
            volume_rwx=bool(options.get("VOLUME_RWX", False)),
            services=services,
            pin_to_node=bool(options.get("PIN_TO_NODE", True)),
            service_type=options.get("SERVICE_TYPE", "ClusterIP"),
            proxy_host=options.get("PROXY_HOST") or cls.proxy_host,
            proxy_prefix=getattr(settings, "CONSOLE_PROXY_PREFIX", "/i/"),
            disk_path=options.get("DISK_PATH", "/workspace"),
            gang_scheduling=gang,
            kueue_queue=options.get("KUEUE_QUEUE", ""),
            coscheduling_scheduler=options.get("COSCHEDULING_SCHEDULER", cls.coscheduling_scheduler),
            image_pull_secrets=tuple(options.get("IMAGE_PULL_SECRETS", ())),
            cpu_per_gpu=str(options.get("CPU_PER_GPU", "") or ""),
            memory_per_gpu=str(options.get("MEMORY_PER_GPU", "") or ""),
            request_timeout_s=float(options.get("REQUEST_TIMEOUT_S", 10)),
            ssh_user=options.get("SSH_USER", "root"),
            volume_usage_from_kubelet=bool(options.get("VOLUME_USAGE_FROM_KUBELET", False)),
            public_volumes=tuple(sorted((options.get("PUBLIC_VOLUMES") or {}).items())),
        )

    def gpu_label_value(self, slug: str) -> str:
        value = dict(self.gpu_models).get(slug)
        if not value:
            raise PermanentBackendError(f"This cluster has no nodes for the GPU model {slug!r}.")
        return value

    def image_for(self, slug: str) -> str:
        return dict(self.images).get(slug) or self.default_image


# --- manifests (pure: what the backend sends, so tests can validate each against the schema) -------------


def _labels(*, alias: str, key: str, owner_ref: str = "") -> dict[str, str]:
    labels = {LABEL_MANAGED: MANAGED_BY, LABEL_BACKEND: alias, LABEL_INSTANCE: key}
    if owner_ref:
        labels[LABEL_OWNER] = owner_ref
    return labels


def _quantity_times(value: str, count: int) -> str:
    """``"8"`` × 2 → ``"16"``; ``"64Gi"`` × 2 → ``"128Gi"`` (requests per GPU, summed)."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([A-Za-z]*)", value.strip())
    if not match:
        raise PermanentBackendError(f"{value!r} is not a Kubernetes quantity this backend can multiply.")
    number = float(match[1]) * count
    return f"{int(number) if number.is_integer() else number}{match[2]}"


def _resources(opts: KubeOptions, gpus: int) -> dict:
    limits = {GPU_RESOURCE: str(gpus)}
    requests = dict(limits)
    if opts.cpu_per_gpu:
        requests["cpu"] = _quantity_times(opts.cpu_per_gpu, gpus)
    if opts.memory_per_gpu:
        requests["memory"] = _quantity_times(opts.memory_per_gpu, gpus)
        limits["memory"] = requests["memory"]
    return {"requests": requests, "limits": limits}


def _placement(opts: KubeOptions, *, gpu_model: str, node: str) -> dict:
    """The node selector on the GPU label, the pin to the console's chosen node, the GPU taint's toleration."""
    placement: dict[str, Any] = {
        "nodeSelector": {opts.gpu_label: opts.gpu_label_value(gpu_model)},
        # GPU node pools are often tainted so that only GPU pods land there (GKE, AKS do it).
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
    }
    if opts.pin_to_node and node:
        # By node name (matchFields), not the hostname label, which need not equal the name.
        placement["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                    ]
                }
            }
        }
    return placement


def _public_volumes(opts: KubeOptions, spec: InstanceSpec) -> list[tuple[str, str]]:
    """The public claims to mount: those whose path no volume of the user's takes (or lies under)."""
    taken = [m.path.rstrip("/") for m in spec.volumes]
    return [
        (path, claim)
        for path, claim in opts.public_volumes
        if not any(t == path.rstrip("/") or t.startswith(path.rstrip("/") + "/") for t in taken)
    ]


def _volume_mounts(spec: InstanceSpec, opts: KubeOptions | None = None) -> list[dict]:
    mounts = [
        {"name": f"v{index}", "mountPath": mount.path, "readOnly": bool(mount.read_only)}
        for index, mount in enumerate(spec.volumes)
    ]
    if opts is not None:
        mounts += [
            {"name": f"public{index}", "mountPath": path, "readOnly": True}
            for index, (path, _claim) in enumerate(_public_volumes(opts, spec))
        ]
    return mounts


def webui_port(opts: KubeOptions, spec: InstanceSpec) -> int | None:
    """The port the app's WebUI listens on in the pod: its own, or the first free one when a server of
    the workspace has it (Open WebUI's 8080 is code-server's). Its command names ``{webui_port}``."""
    if spec.app is None or spec.app.webui is None:
        return None
    taken = {CONTAINER_PORTS[s] for s in opts.services} | {spec.app.port}
    return next(p for p in (spec.app.webui.port, *range(18080, 18180)) if p not in taken)


def _app_values(opts: KubeOptions, *, key: str, spec: InstanceSpec) -> dict[str, str]:
    """What an app's command and env may name: ``{port}``, ``{host}``, ``{base_path}``, ``{webui_port}``."""
    assert spec.app is not None
    return {
        "{port}": str(spec.app.port),
        "{host}": "0.0.0.0",  # noqa: S104 (inside the pod; the Service is the only way in)
        "{base_path}": f"{opts.proxy_prefix}{key}/{APP}",
        "{webui_port}": str(webui_port(opts, spec) or ""),
    }


def _fill(text: str, values: dict[str, str]) -> str:
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return text


def _user_volumes(opts: KubeOptions, spec: InstanceSpec) -> list[dict]:
    """The pod volumes behind ``_volume_mounts``: the user's claims, then the public ones (read-only)."""
    return [
        *(
            {
                "name": f"v{index}",
                "persistentVolumeClaim": {"claimName": volume_name(mount.key), "readOnly": bool(mount.read_only)},
            }
            for index, mount in enumerate(spec.volumes)
        ),
        *(
            {"name": f"public{index}", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}
            for index, (_path, claim) in enumerate(_public_volumes(opts, spec))
        ),
    ]


def pod_template(opts: KubeOptions, *, alias: str, key: str, spec: InstanceSpec) -> dict:
    """The instance's pod: a workspace container (lab/code/ssh) and, with ``spec.app``, the app's container.

    The GPUs go to the container that needs them: the app's when there is one (a deployment exists
    to serve its model), else the workspace's. The device plugin gives a card to one container only.
    """
    name = instance_name(key)
    labels = _labels(alias=alias, key=key, owner_ref=spec.owner_ref)
    base = f"{opts.proxy_prefix}{key}"
    secret_env = [
        {"name": "JUPYTER_TOKEN", "valueFrom": {"secretKeyRef": {"name": f"{name}-secrets", "key": "jupyter-token"}}},
        {"name": "HASHED_PASSWORD", "valueFrom": {"secretKeyRef": {"name": f"{name}-secrets", "key": "code-hash"}}},
    ]
    mounts = [
        {"name": "home", "mountPath": opts.disk_path},
        {"name": "console", "mountPath": FILES_MOUNT, "readOnly": True},
        *_volume_mounts(spec, opts),
    ]
    services = [s for s in opts.services if s in CONTAINER_PORTS]
    workspace: dict[str, Any] = {
        "name": "workspace",
        "image": opts.image_for(spec.image),
        "command": ["/bin/sh", "-c", WORKSPACE_SCRIPT],
        "workingDir": opts.disk_path,
        "env": [
            {"name": "CONSOLE_SERVICES", "value": " ".join(services)},
            {"name": "CONSOLE_HOME", "value": opts.disk_path},
            {"name": "CONSOLE_LAB_BASE_URL", "value": f"{base}/{LAB}/"},
            *secret_env,
        ],
        "ports": [{"name": s, "containerPort": CONTAINER_PORTS[s], "protocol": "TCP"} for s in services],
        "volumeMounts": mounts,
        # The last lines of the log become the termination message: poll shows why it crashed.
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if services:
        workspace["readinessProbe"] = {
            "tcpSocket": {"port": CONTAINER_PORTS[services[0]]},
            "periodSeconds": 5,
            "failureThreshold": 3,
        }
    containers = [workspace]
    if spec.app is None:
        workspace["resources"] = _resources(opts, spec.gpu_count)
    else:
        app = spec.app
        taken = {CONTAINER_PORTS[s]: s for s in services}
        if app.port in taken:
            raise PermanentBackendError(
                f"The app's port {app.port} is the {taken[app.port]} server's; choose another port for the app."
            )
        base_path = f"{base}/{APP}"
        values = _app_values(opts, key=key, spec=spec)

        def fill(text: str, values=values) -> str:
            return _fill(text, values)

        argv = [fill(part) for part in app.argv]
        if not argv:
            raise PermanentBackendError(f"The app {app.name!r} has no start command.")
        health = (base_path if app.serves_base_path else "") + "/" + app.health_path.lstrip("/")
        containers.append(
            {
                "name": "app",
                "image": app.image or opts.image_for(spec.image),
                "command": argv[:1],
                "args": argv[1:],
                "env": [
                    *({"name": k, "value": fill(v)} for k, v in app.env),
                    {"name": "PORT", "value": str(app.port)},
                    {"name": "APP_BASE_PATH", "value": base_path},
                    # The server's own key (vLLM's --api-key $APP_API_KEY); the console's proxy sends it.
                    {
                        "name": "APP_API_KEY",
                        "valueFrom": {
                            "secretKeyRef": {"name": f"{name}-secrets", "key": "app-api-key", "optional": True}
                        },
                    },
                ],
                "ports": [{"name": APP, "containerPort": app.port, "protocol": "TCP"}],
                "resources": _resources(opts, spec.gpu_count),
                "volumeMounts": [
                    {"name": "home", "mountPath": opts.disk_path},
                    *_volume_mounts(spec, opts),
                ],
                # A model server may take minutes to load its weights: readiness, not liveness.
                "readinessProbe": {
                    "httpGet": {"path": health, "port": app.port},
                    "periodSeconds": 5,
                    "failureThreshold": 3,
                },
                "terminationMessagePolicy": "FallbackToLogsOnError",
            }
        )
        if app.webui is not None:
            webui = app.webui
            ui_port = webui_port(opts, spec)
            webui_values = {**values, "{base_path}": f"{base}/{WEBUI}"}
            webui_argv = [fill(part, webui_values) for part in webui.argv]
            webui_health = (f"{base}/{WEBUI}" if webui.serves_base_path else "") + "/" + webui.health_path.lstrip("/")
            containers.append(
                {
                    "name": "webui",
                    "image": webui.image or opts.image_for(spec.image),
                    "command": webui_argv[:1],
                    "args": webui_argv[1:],
                    "env": [
                        *({"name": k, "value": fill(v, webui_values)} for k, v in webui.env),
                        {"name": "PORT", "value": str(ui_port)},
                    ],
                    "ports": [{"name": WEBUI, "containerPort": ui_port, "protocol": "TCP"}],
                    # No GPUs: the WebUI talks to the server over the pod's loopback.
                    "readinessProbe": {
                        "httpGet": {"path": webui_health, "port": ui_port},
                        "periodSeconds": 5,
                        "failureThreshold": 3,
                    },
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                }
            )
    volumes = [
        {"name": "home", "persistentVolumeClaim": {"claimName": f"{name}-home"}},
        {
            "name": "console",
            "secret": {
                "secretName": f"{name}-secrets",
                "defaultMode": 0o444,
                "items": [
                    {"key": "authorized_keys", "path": "authorized_keys"},
                    {"key": "jupyter_server_config.py", "path": "jupyter_server_config.py"},
                ],
            },
        },
        *_user_volumes(opts, spec),
    ]
    pod_spec: dict[str, Any] = {
        "containers": containers,
        "volumes": volumes,
        # User code must not get the namespace's API credentials, nor every Service as env vars.
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 30,
        **_placement(opts, gpu_model=spec.gpu_model, node=spec.node),
    }
    if opts.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": s} for s in opts.image_pull_secrets]
    metadata: dict[str, Any] = {"labels": labels}
    if spec.app is not None:
        # The proxy strips /i/<id>/app unless the app serves under it itself.
        metadata["annotations"] = {ANNOTATION_APP_BASE: "true" if spec.app.serves_base_path else "false"}
        if spec.app.webui is not None:
            metadata["annotations"][ANNOTATION_WEBUI_BASE] = "true" if spec.app.webui.serves_base_path else "false"
    return {"metadata": metadata, "spec": pod_spec}


def statefulset_manifest(opts: KubeOptions, *, alias: str, key: str, spec: InstanceSpec) -> dict:
    name = instance_name(key)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": name,
            "namespace": opts.namespace,
            "labels": _labels(alias=alias, key=key, owner_ref=spec.owner_ref),
            "annotations": {ANNOTATION_NODE: spec.node, ANNOTATION_GPUS: str(spec.gpu_count)},
        },
        "spec": {
            "replicas": 1,
            "serviceName": name,
            # One pod: OrderedReady would only make a stuck pod block its own replacement.
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {LABEL_INSTANCE: key}},
            "template": pod_template(opts, alias=alias, key=key, spec=spec),
        },
    }


def service_manifest(opts: KubeOptions, *, alias: str, key: str, spec: InstanceSpec) -> dict:
    ports = [
        {"name": s, "port": SERVICE_PORTS[s], "targetPort": CONTAINER_PORTS[s], "protocol": "TCP"}
        for s in opts.services
    ]
    if spec.app is not None:
        ports.append({"name": APP, "port": spec.app.port, "targetPort": spec.app.port, "protocol": "TCP"})
        if spec.app.webui is not None:
            port = webui_port(opts, spec)
            ports.append({"name": WEBUI, "port": port, "targetPort": port, "protocol": "TCP"})
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": instance_name(key),
            "namespace": opts.namespace,
            "labels": _labels(alias=alias, key=key, owner_ref=spec.owner_ref),
        },
        "spec": {"type": opts.service_type, "selector": {LABEL_INSTANCE: key}, "ports": ports},
    }


def secret_manifest(opts: KubeOptions, *, alias: str, key: str, spec: InstanceSpec, tokens: dict) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"{instance_name(key)}-secrets",
            "namespace": opts.namespace,
            "labels": _labels(alias=alias, key=key, owner_ref=spec.owner_ref),
        },
        "type": "Opaque",
        "stringData": {
            "jupyter-token": tokens[LAB],
            "code-hash": tokens[CODE],
            "app-api-key": tokens.get(APP, ""),
            "authorized_keys": "".join(k.strip() + "\n" for k in spec.ssh_public_keys if k.strip()),
            "jupyter_server_config.py": JUPYTER_CONFIG,
        },
    }


def home_pvc_manifest(opts: KubeOptions, *, alias: str, key: str, spec: InstanceSpec) -> dict:
    pvc_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": f"{spec.disk_gb}Gi"}},
    }
    if opts.storage_class:
        pvc_spec["storageClassName"] = opts.storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": f"{instance_name(key)}-home",
            "namespace": opts.namespace,
            "labels": _labels(alias=alias, key=key, owner_ref=spec.owner_ref),
        },
        "spec": pvc_spec,
    }


def volume_pvc_manifest(opts: KubeOptions, *, alias: str, key: str, size_gb: int) -> dict:
    pvc_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteMany" if opts.volume_rwx else "ReadWriteOnce"],
        "resources": {"requests": {"storage": f"{size_gb}Gi"}},
    }
    if opts.volume_storage_class:
        pvc_spec["storageClassName"] = opts.volume_storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": volume_name(key),
            "namespace": opts.namespace,
            "labels": {LABEL_MANAGED: MANAGED_BY, LABEL_BACKEND: alias, LABEL_VOLUME: key},
        },
        "spec": pvc_spec,
    }


# Workers' ranks: the Job numbers them 0…N-2, the head is rank 0, so a worker is its index plus one.
# (A pod's env cannot do arithmetic; the shell does, then hands over to the command, its argv intact.)
WORKER_RANK_SCRIPT = 'export NODE_RANK=$((JOB_COMPLETION_INDEX + 1)); exec "$@"'
MASTER_PORT = 29500


def cluster_manifests(
    opts: KubeOptions,
    *,
    alias: str,
    key: str,
    spec: InstanceSpec,
    nodes: int,
    gpus_per_node: int,
    command: tuple[str, ...],
    image: str = "",
    env: tuple[tuple[str, str], ...] = (),
) -> list[dict]:
    """A cluster of ``nodes`` × ``gpus_per_node``, in creation order: a headless Service, with
    coscheduling its PodGroup (it must exist before its pods), the head's StatefulSet and the workers'
    Indexed Job.

    The head (rank 0) is the instance's own StatefulSet ``inst-…`` of one pod, built as a single-node
    machine's (``pod_template``): the workspace container (JupyterLab, code-server, sshd), the home
    disk ``inst-…-home``, the volumes, and the app's container when there is one. It is a separate
    object, not index 0 of the Job, because a Job's pods share one template: a ReadWriteOnce home disk
    mounted by every pod would attach on one node only, so the other pods would never start. The
    instance's Service (``service_manifest``) selects ``console.gpu/instance=<key>``, which only the
    head carries, so the proxy and SSH reach the head as they reach a single-node machine.

    The workers (ranks 1…N-1) are an Indexed Job of ``nodes - 1`` pods running ``command``, with the
    volumes and public claims but no home disk and no servers. Every pod (head included) carries
    ``console.gpu/cluster=<key>``, which the headless Service selects: the head is reachable as
    ``MASTER_ADDR`` = ``inst-…-0.clu-…`` (a StatefulSet's pod takes its Service as subdomain).
    """
    if nodes < 2 or gpus_per_node < 1:
        raise PermanentBackendError("A cluster needs at least two nodes with at least one GPU each.")
    if not command:
        raise PermanentBackendError("A cluster needs a command to run on every node.")
    from dataclasses import replace

    name = cluster_name(key)
    head_name = instance_name(key)
    labels = {LABEL_MANAGED: MANAGED_BY, LABEL_BACKEND: alias, LABEL_CLUSTER: key}
    if spec.owner_ref:
        labels[LABEL_OWNER] = spec.owner_ref
    pod_labels = dict(labels)
    cluster_env = [
        {"name": "NNODES", "value": str(nodes)},
        {"name": "GPUS_PER_NODE", "value": str(gpus_per_node)},
        {"name": "MASTER_ADDR", "value": f"{head_name}-0.{name}"},
        {"name": "MASTER_PORT", "value": str(MASTER_PORT)},
    ]
    rendezvous_port = {"name": "rendezvous", "containerPort": MASTER_PORT, "protocol": "TCP"}
    manifests: list[dict] = [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": opts.namespace, "labels": labels},
            "spec": {
                "clusterIP": "None",
                "selector": {LABEL_CLUSTER: key},
                # Ranks must resolve each other while they start, before any is "ready".
                "publishNotReadyAddresses": True,
                "ports": [{"name": "rendezvous", "port": MASTER_PORT, "targetPort": MASTER_PORT, "protocol": "TCP"}],
            },
        }
    ]

    # The head: a single-node machine's StatefulSet (not pinned: Kubernetes places a cluster's pods).
    head_spec = replace(spec, node="", gpu_count=gpus_per_node, nodes=nodes)
    head = statefulset_manifest(opts, alias=alias, key=key, spec=head_spec)
    head["metadata"]["labels"][LABEL_CLUSTER] = key
    head["spec"]["serviceName"] = name  # its pod's DNS name is <pod>.<headless Service>
    template = head["spec"]["template"]
    template["metadata"]["labels"][LABEL_CLUSTER] = key
    for container in template["spec"]["containers"]:
        if container["name"] == "webui":
            continue
        container["env"] = [*container["env"], *cluster_env, {"name": "NODE_RANK", "value": "0"}]
    # Rank 0's process listens for the others: the app's container when there is one (it runs the
    # cluster's command), else the workspace, where the user starts rank 0 (torchrun --node-rank=0).
    gpu_container = next(
        c for c in template["spec"]["containers"] if GPU_RESOURCE in c.get("resources", {}).get("limits", {})
    )
    gpu_container["ports"] = [*gpu_container.get("ports", []), rendezvous_port]

    worker_argv = list(command)
    worker_env = list(env)
    if spec.app is not None:
        values = _app_values(opts, key=key, spec=head_spec)
        worker_argv = [_fill(part, values) for part in worker_argv]
        worker_env = [(k, _fill(v, values)) for k, v in worker_env]
    pod_spec: dict[str, Any] = {
        "subdomain": name,
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "containers": [
            {
                "name": "worker",
                "image": image or opts.image_for(spec.image),
                "command": ["/bin/sh", "-c", WORKER_RANK_SCRIPT, "console-worker"],
                "args": worker_argv,
                "env": [*cluster_env, *({"name": k, "value": v} for k, v in worker_env)],
                "ports": [rendezvous_port],
                "resources": _resources(opts, gpus_per_node),
                "volumeMounts": _volume_mounts(spec, opts),
            }
        ],
        "volumes": _user_volumes(opts, spec),
        **_placement(opts, gpu_model=spec.gpu_model, node=""),
    }
    if opts.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": s} for s in opts.image_pull_secrets]
    job_metadata: dict[str, Any] = {"name": name, "namespace": opts.namespace, "labels": dict(labels)}
    job_spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": nodes - 1,
        "parallelism": nodes - 1,
        # One rank failing fails the run: a distributed job cannot continue with a hole in it.
        "backoffLimit": 0,
        "template": {"metadata": {"labels": pod_labels}, "spec": pod_spec},
    }
    if opts.gang_scheduling == "kueue":
        # Kueue admits the workers' Job (created suspended) when its whole quota fits. The head is a
        # StatefulSet outside the queue, placed like a single-node machine (see the module docstring).
        job_metadata["labels"][KUEUE_LABEL] = opts.kueue_queue
        job_spec["suspend"] = True
    elif opts.gang_scheduling == "coscheduling":
        # One PodGroup of all N pods, head and workers: the scheduler binds none until all fit.
        for target_labels, target_spec in ((pod_labels, pod_spec), (template["metadata"]["labels"], template["spec"])):
            target_labels[POD_GROUP_LABEL] = name
            target_spec["schedulerName"] = opts.coscheduling_scheduler
        manifests.append(
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": opts.namespace, "labels": labels},
                "spec": {"minMember": nodes, "scheduleTimeoutSeconds": 600},
            }
        )
    manifests.append(head)
    manifests.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": job_metadata, "spec": job_spec})
    return manifests


# --- reading pods ---------------------------------------------------------------------------------------


def _condition(obj: dict, kind: str) -> dict:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return condition
    return {}


def _pod_ready(pod: dict) -> bool:
    return _condition(pod, "Ready").get("status") == "True"


def observe_pod(pod: dict | None) -> Observation:
    """What one pod's status says, without asking about its node (``poll`` adds that)."""
    if pod is None:
        return Observation(Observed.PENDING, detail="creating the pod")
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    if meta.get("deletionTimestamp"):
        return Observation(Observed.PENDING, detail="the previous pod is shutting down")
    phase = status.get("phase") or "Pending"
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason") or ""
        if reason == "CrashLoopBackOff":
            last = ((container.get("lastState") or {}).get("terminated")) or {}
            why = (last.get("message") or "").strip().splitlines()
            code = last.get("exitCode")
            detail = f"{container.get('name')} keeps crashing"
            if code is not None:
                detail += f" (exit code {code}"
                detail += f": {why[-1][:160]})" if why else ")"
            return Observation(Observed.DEGRADED, detail=detail)
        if reason in _WAITING_BROKEN:
            message = (waiting.get("message") or reason)[:200]
            return Observation(Observed.PENDING, detail=f"{container.get('name')}: {message}")
    if phase == "Running" and _pod_ready(pod):
        return Observation(Observed.RUNNING)
    if phase == "Running":
        unready = [c.get("name") for c in status.get("containerStatuses") or [] if not c.get("ready")]
        return Observation(Observed.PENDING, detail=f"waiting for {', '.join(unready) or 'the pod'} to be ready")
    if phase in ("Failed", "Succeeded"):
        # A StatefulSet replaces a pod that ended (evicted, node shutdown): not gone, coming back.
        reason = status.get("reason") or phase
        return Observation(Observed.PENDING, detail=f"the pod ended ({reason}); it is being replaced")
    scheduled = _condition(pod, "PodScheduled")
    if scheduled.get("status") == "False":
        return Observation(Observed.PENDING, detail=(scheduled.get("message") or "waiting for a node")[:200])
    return Observation(Observed.PENDING, detail="starting")


@dataclass(frozen=True)
class PodEvent:
    """One change to an instance's pod, as ``watch_pods`` yields it."""

    type: str  # ADDED, MODIFIED, DELETED
    key: str
    pod: str
    phase: str
    ready: bool
    observation: Observation
    resource_version: str = ""


# --- the API --------------------------------------------------------------------------------------------


class _NotFound(Exception):
    pass


class _AlreadyExists(Exception):
    pass


def _status_message(exc) -> tuple[str, str]:
    """The API server's ``Status`` (reason, message) from an ApiException's body, when it has one."""
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        body = {}
    return body.get("reason") or exc.reason or "", body.get("message") or exc.reason or ""


class KubernetesBackend(ProvisioningBackend):
    """A namespace of a Kubernetes cluster: one machine is a StatefulSet of one pod with its disk.

    A multi-node instance (``spec.nodes`` > 1) is a head and workers (``cluster_create``; see the
    module's docstring): the head is a single machine's StatefulSet, disk, Service and Secret, with
    the same entry points (JupyterLab, VS Code, SSH, the app), and the workers an Indexed Job of
    ``nodes - 1`` pods behind a headless Service, running the app's command (or ``CLUSTER_COMMAND``,
    ``sleep infinity`` by default, to hold the cards for a user who launches from the head). Stopping
    a cluster deletes the Job and scales the head to zero (the cards go back; the disk, the Secret
    and the Services stay); starting it makes the Job again and scales the head back to one.
    """

    supports_volumes = True
    max_nodes = 128

    def __init__(self, *, alias: str, options: dict | None = None) -> None:
        super().__init__(alias=alias, options=options)
        self.supports_shared_write = bool(self.options.get("VOLUME_RWX", False))
        self._client_lock = threading.Lock()
        self._api_client = None
        self._api_objects: tuple | None = None
        self._opts: KubeOptions | None = None
        self._targets: dict[tuple[str, str], tuple[float, Any]] = {}

    # --- the client -------------------------------------------------------------------------------

    def _connect(self) -> None:
        from kubernetes import client, config

        with self._client_lock:
            if self._api_client is not None:
                return
            configuration = client.Configuration()
            namespace = self.options.get("NAMESPACE") or ""
            try:
                if self.options.get("IN_CLUSTER"):
                    config.load_incluster_config(client_configuration=configuration)
                    if not namespace:
                        with (
                            contextlib.suppress(OSError),
                            open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f,
                        ):
                            namespace = f.read().strip()
                else:
                    kubeconfig = self.options.get("KUBECONFIG") or None
                    context = self.options.get("CONTEXT") or None
                    config.load_kube_config(
                        config_file=kubeconfig,
                        context=context,
                        client_configuration=configuration,
                        persist_config=False,
                    )
                    if not namespace:
                        contexts, current = config.list_kube_config_contexts(config_file=kubeconfig)
                        chosen = next((c for c in contexts if c["name"] == context), current) if context else current
                        namespace = ((chosen or {}).get("context") or {}).get("namespace") or ""
            except config.ConfigException as exc:
                raise PermanentBackendError(f"The Kubernetes configuration could not be loaded: {exc}") from exc
            # One quick retry of a dropped connection; the console's tasks retry the rest with backoff.
            configuration.retries = 1
            self._opts = KubeOptions.from_options(self.options, namespace=namespace or "default", alias=self.alias)
            self._api_client = client.ApiClient(configuration)

    @property
    def opts(self) -> KubeOptions:
        if self._opts is None:
            self._connect()
        return self._opts

    @property
    def namespace(self) -> str:
        return self.opts.namespace

    def _apis(self):
        """The four API groups the backend uses, made once (building them imports the whole client)."""
        if self._api_objects is None:
            from kubernetes import client

            self._connect()
            self._api_objects = (
                client.CoreV1Api(self._api_client),
                client.AppsV1Api(self._api_client),
                client.BatchV1Api(self._api_client),
                client.CustomObjectsApi(self._api_client),
            )
        return self._api_objects

    @property
    def core(self):
        return self._apis()[0]

    @property
    def apps(self):
        return self._apis()[1]

    @property
    def batch(self):
        return self._apis()[2]

    @property
    def custom(self):
        return self._apis()[3]

    def _call(self, method: Callable, *args, **kwargs) -> dict | None:
        """Call the API; return the answer as a plain dict (as the API server wrote it).

        404 raises ``_NotFound`` and 409 AlreadyExists ``_AlreadyExists`` (the callers decide whether
        those are success); 5xx, 429, a conflict and no answer at all are transient; the rest is the
        API server refusing the request, permanent, with its message.
        """
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        kwargs.setdefault("_request_timeout", self.opts.request_timeout_s)
        try:
            response = method(*args, _preload_content=False, **kwargs)
        except ApiException as exc:
            reason, message = _status_message(exc)
            status = exc.status or 0
            if status == 404:
                raise _NotFound(message) from exc
            if status == 409 and reason == "AlreadyExists":
                raise _AlreadyExists(message) from exc
            if status in (409, 429) or status >= 500 or status == 0:
                raise TransientBackendError(f"The Kubernetes API is busy ({status} {reason}): {message}") from exc
            if status in (401, 403):
                raise PermanentBackendError(f"The Kubernetes API refused the console ({status}): {message}") from exc
            raise PermanentBackendError(f"Kubernetes refused the request: {message}") from exc
        except (HTTPError, OSError) as exc:
            raise TransientBackendError(f"The Kubernetes API did not answer: {exc.__class__.__name__}") from exc
        data = response.data
        return json.loads(data) if data else None

    def _create(self, method: Callable, read: Callable, manifest: dict, *, key: str = "", label: str = LABEL_INSTANCE):
        """Create ``manifest``; if it exists, return the existing object (it must belong to ``key``)."""
        name = manifest["metadata"]["name"]
        try:
            return self._call(method, self.namespace, manifest)
        except _AlreadyExists:
            try:
                existing = self._call(read, name, self.namespace)
            except _NotFound as exc:  # deleted between the two calls: let the retry create it
                raise TransientBackendError(f"{name} was being deleted; try again.") from exc
            owner = ((existing.get("metadata") or {}).get("labels") or {}).get(label)
            if key and owner != key:
                raise PermanentBackendError(
                    f"The name {name} is taken by another object ({owner or 'unlabelled'})."
                ) from None
            return existing

    def _delete(self, method: Callable, name: str, **kwargs) -> None:
        with contextlib.suppress(_NotFound):
            self._call(method, name, self.namespace, **kwargs)

    def _selector(self, extra: str = "") -> str:
        base = f"{LABEL_MANAGED}={MANAGED_BY},{LABEL_BACKEND}={self.alias}"
        return f"{base},{extra}" if extra else base

    # --- nodes ------------------------------------------------------------------------------------------

    def nodes(self) -> list[NodeInfo]:
        """Nodes with the GPU label whose value maps to a console GPU model; cards = allocatable GPUs.

        Healthy: the kubelet reports Ready and nobody cordoned it. A node whose device plugin has not
        registered yet has 0 allocatable cards (the console places nothing there).
        """
        opts = self.opts
        slugs = {value: slug for slug, value in opts.gpu_models}
        found = self._call(self.core.list_node, label_selector=opts.gpu_label)
        infos = []
        for node in found.get("items") or []:
            meta = node.get("metadata") or {}
            product = (meta.get("labels") or {}).get(opts.gpu_label, "")
            slug = slugs.get(product)
            if slug is None:
                logger.info("node %s: GPU %r is not in GPU_MODELS; ignored", meta.get("name"), product)
                continue
            infos.append(
                NodeInfo(
                    name=meta["name"],
                    region=opts.region,
                    gpu_model=slug,
                    cards=_allocatable_gpus(node),
                    healthy=_node_healthy(node),
                )
            )
        return sorted(infos, key=lambda n: n.name)

    # --- instances --------------------------------------------------------------------------------------

    def create(self, *, key: str, spec: InstanceSpec) -> dict:
        """Secret, disk, Service, then the StatefulSet; each that exists is kept (a retry finds them).

        The Secret first: a retry reads the tokens it holds instead of minting new ones. A cluster
        (``spec.nodes`` > 1) is its head and workers instead (``cluster_create``).
        """
        if spec.nodes > 1:
            return self._cluster_start(key, spec)
        self._volumes_check(spec)
        tokens = self._ensure_workspace(key, spec)
        sts = self._create(
            self.apps.create_namespaced_stateful_set,
            self.apps.read_namespaced_stateful_set,
            statefulset_manifest(self.opts, alias=self.alias, key=key, spec=spec),
            key=key,
        )
        node = ((sts.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_NODE, spec.node)
        return self._state(key, node=node, gpus=spec.gpu_count, tokens=tokens)

    def _state(self, key: str, *, node: str, gpus: int, tokens: dict) -> dict:
        return {
            "v": STATE_VERSION,
            "namespace": self.namespace,
            "name": instance_name(key),
            "node": node,
            "gpus": gpus,
            "secrets": {LAB: tokens[LAB], CODE: tokens[CODE], APP: tokens.get(APP, "")},
        }

    def _volumes_check(self, spec: InstanceSpec) -> None:
        for mount in spec.volumes:
            try:
                self._call(self.core.read_namespaced_persistent_volume_claim, volume_name(mount.key), self.namespace)
            except _NotFound as exc:
                raise PermanentBackendError(f"The volume {mount.key} does not exist in this region.") from exc

    def _read_sts(self, key: str) -> dict:
        try:
            return self._call(self.apps.read_namespaced_stateful_set, instance_name(key), self.namespace)
        except _NotFound as exc:
            raise PermanentBackendError("The machine no longer exists.") from exc

    def _pods(self, key: str) -> list[dict]:
        found = self._call(self.core.list_namespaced_pod, self.namespace, label_selector=f"{LABEL_INSTANCE}={key}")
        return found.get("items") or []

    # --- a cluster as an instance (a head and a Job of workers; see the module docstring) -----------------

    def _cluster_command(self, spec: InstanceSpec) -> tuple[str, ...]:
        if spec.app is not None and spec.app.argv:
            return tuple(spec.app.argv)
        return tuple(self.options.get("CLUSTER_COMMAND") or ("sleep", "infinity"))

    def _cluster_start(self, key: str, spec: InstanceSpec) -> dict:
        """Make the cluster's Job (and Service), or find the one a previous attempt made.

        A Job still being deleted (a stop or restart a moment ago) cannot be made again yet: a
        transient error, so the task retries once Kubernetes has finished deleting it.
        """
        try:
            job = self._call(self.batch.read_namespaced_job, cluster_name(key), self.namespace)
        except _NotFound:
            job = None
        if job is not None and (job.get("metadata") or {}).get("deletionTimestamp"):
            raise TransientBackendError("The cluster's previous run is still ending; try again shortly.")
        if job is not None and _condition(job, "Failed").get("status") == "True":
            # A failed run (a rank died) is replaced on start: delete it now, make it at the retry.
            self._delete(self.batch.delete_namespaced_job, cluster_name(key), propagation_policy="Background")
            raise TransientBackendError("The cluster's failed run is being removed; try again shortly.")
        self._forget(key)
        self._cluster_mark_stopped(key, False)
        command = self._cluster_command(spec)
        state = self.cluster_create(key=key, nodes=spec.nodes, gpus_per_node=spec.gpu_count, spec=spec, command=command)
        # The head outlives a stop (scaled to zero): bring it back with this start's template (app,
        # volumes, image may have changed), as a single machine's start does.
        head = next(
            m
            for m in self.cluster_manifests(
                key=key, nodes=spec.nodes, gpus_per_node=spec.gpu_count, spec=spec, command=command
            )
            if m["kind"] == "StatefulSet"
        )
        self._call(
            self.apps.patch_namespaced_stateful_set,
            instance_name(key),
            self.namespace,
            [
                {"op": "replace", "path": "/spec/template", "value": head["spec"]["template"]},
                {"op": "replace", "path": "/spec/replicas", "value": 1},
            ],
        )
        self._replace_service_ports(key, spec)
        for pod in self._pods(key):
            if observe_pod(pod).state == Observed.DEGRADED:
                self._delete(self.core.delete_namespaced_pod, pod["metadata"]["name"])
        return {**state, "cluster": True, "gpus": spec.gpu_count}

    def _cluster_mark_stopped(self, key: str, stopped: bool) -> None:
        """Say on the cluster's Service that it was stopped on purpose: the console does not keep the
        state a stop returns, so the provider is where a poll tells "stopped" from "its Job was lost"."""
        with contextlib.suppress(_NotFound):
            self._call(
                self.core.patch_namespaced_service,
                cluster_name(key),
                self.namespace,
                {"metadata": {"annotations": {ANNOTATION_STOPPED: "true" if stopped else None}}},
                _content_type="application/merge-patch+json",
            )

    def _cluster_stop(self, key: str, state: dict) -> dict:
        """Delete the workers' Job and scale the head to zero (the pods, and their cards, go); the
        Services, the Secret and the head's home disk stay for the next start."""
        self._forget(key)
        self._cluster_mark_stopped(key, True)
        self._delete(self.batch.delete_namespaced_job, cluster_name(key), propagation_policy="Background")
        with contextlib.suppress(_NotFound):
            self._call(
                self.apps.patch_namespaced_stateful_set,
                instance_name(key),
                self.namespace,
                {"spec": {"replicas": 0}},
                _content_type="application/merge-patch+json",
            )
        if self.opts.gang_scheduling == "coscheduling":
            with contextlib.suppress(_NotFound):
                self._call(
                    self.custom.delete_namespaced_custom_object,
                    "scheduling.x-k8s.io",
                    "v1alpha1",
                    self.namespace,
                    "podgroups",
                    cluster_name(key),
                )
        return dict(state)

    def _cluster_observe(self, key: str, state: dict) -> Observation:
        try:
            service = self._call(self.core.read_namespaced_service, cluster_name(key), self.namespace)
        except _NotFound:
            service = None
        except TransientBackendError as exc:
            return Observation(Observed.UNKNOWN, detail=str(exc)[:200])
        stopped = ((service or {}).get("metadata") or {}).get("annotations", {}).get(ANNOTATION_STOPPED) == "true"
        if not stopped:
            return self.cluster_poll(key=key, state=state)
        try:
            self._call(self.batch.read_namespaced_job, cluster_name(key), self.namespace)
        except _NotFound:
            if not self._pods(key):  # the head's pod too
                return Observation(Observed.STOPPED)
        except TransientBackendError as exc:
            return Observation(Observed.UNKNOWN, detail=str(exc)[:200])
        return Observation(Observed.PENDING, detail="shutting down")

    def start(self, *, key: str, state: dict, node: str, spec: InstanceSpec | None = None) -> dict:
        """Scale to one on ``node``; with ``spec``, first replace the pod template (app, volumes, image).

        On a running machine whose container keeps crashing (the console's repair), the pod is
        deleted: its replacement starts at once instead of after the kubelet's growing back-off.
        A cluster's Job is made again (from ``spec``: the console always passes it).
        """
        if state.get("cluster"):
            if spec is None:
                raise PermanentBackendError("A cluster starts only with its spec.")
            return {**state, **self._cluster_start(key, spec)}
        self._forget(key)
        sts = self._read_sts(key)
        name = instance_name(key)
        ops: list[dict] = []
        if spec is not None:
            spec = _with_node(spec, node)
            self._volumes_check(spec)
            ops.append({"op": "replace", "path": "/spec/template", "value": self._template(key, spec)})
            self._replace_service_ports(key, spec)
        elif node:
            template = ((sts.get("spec") or {}).get("template") or {}).get("spec") or {}
            if self.opts.pin_to_node:
                placement = {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                            ]
                        }
                    }
                }
                op = "replace" if "affinity" in template else "add"
                ops.append({"op": op, "path": "/spec/template/spec/affinity", "value": placement})
        annotations = (sts.get("metadata") or {}).get("annotations") or {}
        ops.append(
            {
                "op": "replace" if annotations else "add",
                "path": "/metadata/annotations",
                "value": {**annotations, ANNOTATION_NODE: node or annotations.get(ANNOTATION_NODE, "")},
            }
        )
        ops.append({"op": "replace", "path": "/spec/replicas", "value": 1})
        self._call(self.apps.patch_namespaced_stateful_set, name, self.namespace, ops)
        for pod in self._pods(key):
            if observe_pod(pod).state == Observed.DEGRADED:
                self._delete(self.core.delete_namespaced_pod, pod["metadata"]["name"])
        gpus = int(annotations.get(ANNOTATION_GPUS) or state.get("gpus") or 0)
        return {**self._state(key, node=node, gpus=gpus, tokens=self._tokens(key, state)), **_extra(state)}

    def _template(self, key: str, spec: InstanceSpec) -> dict:
        return pod_template(self.opts, alias=self.alias, key=key, spec=spec)

    def _replace_service_ports(self, key: str, spec: InstanceSpec) -> None:
        ports = service_manifest(self.opts, alias=self.alias, key=key, spec=spec)["spec"]["ports"]
        try:
            self._call(
                self.core.patch_namespaced_service,
                instance_name(key),
                self.namespace,
                [{"op": "replace", "path": "/spec/ports", "value": ports}],
            )
        except _NotFound:
            self._create(
                self.core.create_namespaced_service,
                self.core.read_namespaced_service,
                service_manifest(self.opts, alias=self.alias, key=key, spec=spec),
                key=key,
            )

    def stop(self, *, key: str, state: dict) -> dict:
        """Scale to zero: the pod goes (and its GPUs with it); disk, Secret and Service stay.

        A cluster's Job is deleted instead (see the class's docstring)."""
        if state.get("cluster"):
            return self._cluster_stop(key, state)
        self._forget(key)
        try:
            self._call(
                self.apps.patch_namespaced_stateful_set,
                instance_name(key),
                self.namespace,
                {"spec": {"replicas": 0}},
                _content_type="application/merge-patch+json",
            )
        except _NotFound as exc:
            raise PermanentBackendError("The machine no longer exists.") from exc
        return dict(state)

    def restart(self, *, key: str, state: dict, spec: InstanceSpec | None = None) -> dict:
        """Delete the pod; the StatefulSet makes a new one on the same node (with ``spec``'s template).

        A cluster is stopped and started: its Job is made again once the old one is gone (until then
        the start is a transient error the task retries)."""
        if state.get("cluster"):
            if spec is None:
                raise PermanentBackendError("A cluster restarts only with its spec.")
            stopped = self._cluster_stop(key, state)
            return {**stopped, **self._cluster_start(key, spec)}
        self._forget(key)
        sts = self._read_sts(key)
        if not (sts.get("spec") or {}).get("replicas"):
            raise PermanentBackendError("Only a running machine can be restarted.")
        if spec is not None:
            node = ((sts.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_NODE, spec.node)
            spec = _with_node(spec, node)
            self._volumes_check(spec)
            self._call(
                self.apps.patch_namespaced_stateful_set,
                instance_name(key),
                self.namespace,
                [{"op": "replace", "path": "/spec/template", "value": self._template(key, spec)}],
            )
            self._replace_service_ports(key, spec)
        self._delete(self.core.delete_namespaced_pod, f"{instance_name(key)}-0")
        return dict(state)

    def destroy(self, *, key: str, state: dict) -> None:
        """Delete the StatefulSet (its pod with it), the Service, the Secret and the disk; gone is done.

        A cluster's Job and Service go instead; with no state (the reconciler's leaked machine), both."""
        if state.get("cluster") or not state:
            self.cluster_destroy(key=key, state=state)
            if state:
                return
        self._forget(key)
        name = instance_name(key)
        self._delete(self.apps.delete_namespaced_stateful_set, name, propagation_policy="Background")
        self._delete(self.core.delete_namespaced_service, name)
        self._delete(self.core.delete_namespaced_secret, f"{name}-secrets")
        self._delete(self.core.delete_namespaced_persistent_volume_claim, f"{name}-home")

    def poll(self, *, key: str, state: dict) -> Observation:
        if state.get("cluster"):
            try:
                return self._cluster_observe(key, state)
            except (TransientBackendError, PermanentBackendError) as exc:
                return Observation(Observed.UNKNOWN, detail=str(exc)[:200])
        try:
            return self._poll(key)
        except (TransientBackendError, PermanentBackendError) as exc:
            # Unreachable, or refusing the console's credentials or configuration: it cannot tell,
            # and a machine it cannot see is not thereby gone.
            return Observation(Observed.UNKNOWN, detail=str(exc)[:200])

    def _poll(self, key: str) -> Observation:
        try:
            sts = self._call(self.apps.read_namespaced_stateful_set, instance_name(key), self.namespace)
        except _NotFound:
            return Observation(Observed.GONE)
        pods = self._pods(key)
        return self._observe(sts, pods[0] if pods else None, self._read_node)

    def _read_node(self, name: str) -> dict | None:
        try:
            return self._call(self.core.read_node, name)
        except _NotFound:
            return None

    def _observe(self, sts: dict, pod: dict | None, node_of: Callable[[str], dict | None]) -> Observation:
        replicas = (sts.get("spec") or {}).get("replicas")
        if replicas == 0:
            if pod is not None:
                return Observation(Observed.PENDING, detail="shutting down")
            return Observation(Observed.STOPPED)
        seen = observe_pod(pod)
        if seen.state == Observed.RUNNING:
            return seen
        # Not running: is it because its node is in trouble? A node that stopped reporting may come
        # back (UNKNOWN: never GONE); a node removed from the cluster takes the pinned machine with it.
        node_name = ((pod or {}).get("spec") or {}).get("nodeName") or (
            ((sts.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_NODE, "")
            if self.opts.pin_to_node
            else ""
        )
        if node_name:
            node = node_of(node_name)
            if node is None:
                return Observation(Observed.GONE, detail=f"node {node_name} was removed from the cluster")
            if _condition(node, "Ready").get("status") != "True":
                return Observation(Observed.UNKNOWN, detail=f"node {node_name} is not reporting (NotReady)")
        return seen

    def machines(self) -> list[MachineInfo]:
        sets = self._call(self.apps.list_namespaced_stateful_set, self.namespace, label_selector=self._selector())
        pods = self._call(self.core.list_namespaced_pod, self.namespace, label_selector=self._selector(LABEL_INSTANCE))
        nodes = {n["metadata"]["name"]: n for n in (self._call(self.core.list_node) or {}).get("items") or []}
        by_key: dict[str, dict] = {}
        for pod in pods.get("items") or []:
            by_key.setdefault(((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_INSTANCE, ""), pod)
        machines = []
        heads: dict[str, dict] = {}
        for sts in sets.get("items") or []:
            meta = sts.get("metadata") or {}
            key = (meta.get("labels") or {}).get(LABEL_INSTANCE)
            if not key:
                continue
            if LABEL_CLUSTER in (meta.get("labels") or {}):
                heads[key] = sts  # a cluster's head: one machine with its workers (below)
                continue
            pod = by_key.get(key)
            annotations = meta.get("annotations") or {}
            observed = self._observe(sts, pod, nodes.get).state
            machines.append(
                MachineInfo(
                    key=key,
                    node=((pod or {}).get("spec") or {}).get("nodeName") or annotations.get(ANNOTATION_NODE, ""),
                    cards=int(annotations.get(ANNOTATION_GPUS) or 0),
                    observed=observed,
                    extra={"name": meta.get("name"), "namespace": self.namespace},
                )
            )
        # Clusters (their workers' Jobs and heads): running once every pod is ready, as ``cluster_poll`` says.
        jobs = self._call(self.batch.list_namespaced_job, self.namespace, label_selector=self._selector(LABEL_CLUSTER))
        for job in jobs.get("items") or []:
            key = ((job.get("metadata") or {}).get("labels") or {}).get(LABEL_CLUSTER)
            if not key:
                continue
            spec, status = job.get("spec") or {}, job.get("status") or {}
            wanted = int(spec.get("parallelism") or 0)
            head = heads.pop(key, None)
            head_seen = self._observe(head, by_key.get(key), nodes.get).state if head else Observed.GONE
            if _condition(job, "Failed").get("status") == "True" or head is None:
                observed = Observed.GONE
            elif head_seen == Observed.DEGRADED:
                observed = Observed.DEGRADED
            elif wanted and int(status.get("ready") or status.get("active") or 0) >= wanted:
                observed = Observed.RUNNING if head_seen == Observed.RUNNING else Observed.PENDING
            else:
                observed = Observed.PENDING
            wanted += 1
            containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or [{}]
            limits = (containers[0].get("resources") or {}).get("limits") or {}
            per_node = int(limits.get(GPU_RESOURCE, 0) or 0)
            machines.append(
                MachineInfo(
                    key=key,
                    node="",
                    cards=per_node * wanted,
                    observed=observed,
                    extra={
                        "name": (job.get("metadata") or {}).get("name"),
                        "namespace": self.namespace,
                        "cluster": True,
                    },
                )
            )
        # A head without its Job: a stopped cluster (STOPPED once its pod is gone), or one being made.
        for key, head in heads.items():
            meta = head.get("metadata") or {}
            machines.append(
                MachineInfo(
                    key=key,
                    node="",
                    cards=0,
                    # Its Job lost while the head runs: not a whole cluster (the sync's poll says why).
                    observed=Observed.STOPPED
                    if self._observe(head, by_key.get(key), nodes.get).state == Observed.STOPPED
                    else Observed.GONE,
                    extra={"name": meta.get("name"), "namespace": self.namespace, "cluster": True},
                )
            )
        return machines

    def watch_pods(self, *, timeout_s: int = 60, resource_version: str | None = None) -> Iterator[PodEvent]:
        """Yield each change to this backend's instance pods until ``timeout_s`` passes.

        For a reconciler that reacts within a second instead of polling: on each event, sync the
        instance ``event.key``. Without ``resource_version`` the first events are the pods that
        exist now (ADDED), as the API server sends them; pass the last event's version to resume.
        """
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        stream = watch.Watch()
        kwargs: dict[str, Any] = {
            "label_selector": self._selector(LABEL_INSTANCE),
            "timeout_seconds": int(timeout_s),
            "_request_timeout": (self.opts.request_timeout_s, timeout_s + self.opts.request_timeout_s),
            "deserialize": False,
        }
        if resource_version:
            kwargs["resource_version"] = resource_version
        try:
            for event in stream.stream(self.core.list_namespaced_pod, self.namespace, **kwargs):
                pod = event["object"]
                meta = pod.get("metadata") or {}
                yield PodEvent(
                    type=event["type"],
                    key=(meta.get("labels") or {}).get(LABEL_INSTANCE, ""),
                    pod=meta.get("name", ""),
                    phase=(pod.get("status") or {}).get("phase", ""),
                    ready=_pod_ready(pod),
                    observation=observe_pod(None if event["type"] == "DELETED" else pod),
                    resource_version=meta.get("resourceVersion", ""),
                )
        except ApiException as exc:
            raise TransientBackendError(f"The pod watch ended: {exc.status} {exc.reason}") from exc
        except (HTTPError, OSError) as exc:
            raise TransientBackendError(f"The pod watch ended: {exc.__class__.__name__}") from exc
        finally:
            stream.stop()

    # --- entry points and the proxy ----------------------------------------------------------------------

    def entry_points(self, *, key: str, state: dict) -> EntryPoints:
        # A cluster's head is reached as a single machine is: the instance's Service selects only it.
        web = tuple(s for s in (LAB, CODE) if s in self.opts.services)
        ssh_port = None
        service = {}
        with contextlib.suppress(_NotFound, TransientBackendError, PermanentBackendError):
            service = self._call(self.core.read_namespaced_service, instance_name(key), self.namespace)
        named = {port.get("name"): port for port in (service.get("spec") or {}).get("ports") or []}
        # A deployment's app (and its WebUI) are served wherever the Service has their ports.
        web += tuple(s for s in (APP, WEBUI) if s in named)
        if SSH in self.opts.services and self.opts.service_type in ("NodePort", "LoadBalancer") and SSH in named:
            # A ClusterIP is unreachable from the user's laptop; only an exposed Service has an SSH port.
            port = named[SSH]
            ssh_port = port.get("nodePort") if self.opts.service_type == "NodePort" else port.get("port")
        return EntryPoints(web=web, ssh_port=ssh_port, ssh_user=self.opts.ssh_user if ssh_port else "")

    def proxy_target(self, *, key: str, service: str):
        """The Service's cluster DNS name (``PROXY_HOST``) and port, with the server's secret to inject.

        Cached for a few seconds per process: the proxy asks on every request, and the token and
        ports change only through this backend's own start/restart/stop (which drop the cache).
        """
        cached = self._targets.get((key, service))
        if cached and cached[0] > time.monotonic():
            return cached[1]
        target = self._proxy_target(key, service)
        self._targets[(key, service)] = (time.monotonic() + 10.0, target)
        return target

    def _proxy_target(self, key: str, service: str):
        from console.proxy import ProxyTarget

        if service not in (LAB, CODE, APP, WEBUI) or (service in (LAB, CODE) and service not in self.opts.services):
            return None
        name = instance_name(key)
        try:
            svc = self._call(self.core.read_namespaced_service, name, self.namespace)
        except _NotFound:
            return None
        port = next((p for p in (svc.get("spec") or {}).get("ports") or [] if p.get("name") == service), None)
        if port is None:
            return None
        host = self.opts.proxy_host.format(service=name, namespace=self.namespace, key=key)
        # A console outside the cluster reaches a NodePort Service on a node's address (PROXY_HOST).
        number = port.get("nodePort") if self.opts.service_type == "NodePort" else port["port"]
        if not number:
            return None
        tokens = self._tokens(key, {})
        if service in (APP, WEBUI):
            sts = self._read_sts(key)
            template_meta = sts["spec"]["template"].get("metadata") or {}
            annotation = ANNOTATION_APP_BASE if service == APP else ANNOTATION_WEBUI_BASE
            serves_base = (template_meta.get("annotations") or {}).get(annotation) == "true"
            if service == APP and tokens.get(APP):
                return ProxyTarget(
                    host=host,
                    port=number,
                    strip_prefix=not serves_base,
                    headers=(("Authorization", f"Bearer {tokens[APP]}"),),
                    secrets=(tokens[APP],),
                )
            return ProxyTarget(host=host, port=number, strip_prefix=not serves_base)
        if service == LAB:
            secret = tokens[LAB]
            return ProxyTarget(
                host=host, port=number, headers=(("Authorization", f"token {secret}"),), secrets=(secret,)
            )
        secret = tokens[CODE]
        return ProxyTarget(
            host=host, port=number, strip_prefix=True, cookies=((CODE_SERVER_COOKIE, secret),), secrets=(secret,)
        )

    def _tokens(self, key: str, state: dict) -> dict:
        if (state.get("secrets") or {}).get(LAB):
            return state["secrets"]
        try:
            secret = self._call(self.core.read_namespaced_secret, f"{instance_name(key)}-secrets", self.namespace)
        except _NotFound as exc:
            raise PermanentBackendError("The machine's secrets are gone.") from exc
        return _secret_tokens(secret)

    def _forget(self, key: str) -> None:
        for cache_key in [k for k in self._targets if k[0] == key]:
            self._targets.pop(cache_key, None)

    # --- volumes --------------------------------------------------------------------------------------------

    def volume_create(self, *, key: str, size_gb: int) -> dict:
        pvc = self._create(
            self.core.create_namespaced_persistent_volume_claim,
            self.core.read_namespaced_persistent_volume_claim,
            volume_pvc_manifest(self.opts, alias=self.alias, key=key, size_gb=size_gb),
            key=key,
            label=LABEL_VOLUME,
        )
        return _volume_state(pvc, self.namespace)

    def volume_resize(self, *, key: str, state: dict, size_gb: int) -> dict:
        """Patch the claim's storage request; the storage class must allow expansion (the API says if not)."""
        try:
            pvc = self._call(self.core.read_namespaced_persistent_volume_claim, volume_name(key), self.namespace)
        except _NotFound as exc:
            raise PermanentBackendError("The volume no longer exists.") from exc
        current = _gib(pvc["spec"]["resources"]["requests"]["storage"])
        if size_gb < current:
            raise PermanentBackendError(f"A volume can only grow: it has {current} GB.")
        if size_gb == current:
            return _volume_state(pvc, self.namespace)
        pvc = self._call(
            self.core.patch_namespaced_persistent_volume_claim,
            volume_name(key),
            self.namespace,
            {"spec": {"resources": {"requests": {"storage": f"{size_gb}Gi"}}}},
            _content_type="application/merge-patch+json",
        )
        return _volume_state(pvc, self.namespace)

    def volume_destroy(self, *, key: str, state: dict) -> None:
        """Delete the claim. Kubernetes keeps it (Terminating) until no pod mounts it, then deletes it."""
        self._delete(self.core.delete_namespaced_persistent_volume_claim, volume_name(key))

    def volume_usage(self, *, key: str, state: dict) -> int | None:
        """Bytes used, from the kubelet's stats of a running pod that mounts it (``VOLUME_USAGE_FROM_KUBELET``).

        Off by default: it needs ``get`` on ``nodes/proxy``, which reaches the kubelet's whole API.
        None when off, when no running pod mounts the volume, or when the API cannot tell now.
        """
        if not self.opts.volume_usage_from_kubelet:
            return None
        claim = volume_name(key)
        try:
            pods = self._call(
                self.core.list_namespaced_pod, self.namespace, label_selector=self._selector(LABEL_INSTANCE)
            )
            for pod in pods.get("items") or []:
                node = (pod.get("spec") or {}).get("nodeName")
                claims = {
                    (v.get("persistentVolumeClaim") or {}).get("claimName")
                    for v in (pod.get("spec") or {}).get("volumes") or []
                }
                if not node or claim not in claims or (pod.get("status") or {}).get("phase") != "Running":
                    continue
                summary = self._call(self.core.connect_get_node_proxy_with_path, node, "stats/summary")
                for pod_stats in summary.get("pods") or []:
                    for volume in pod_stats.get("volume") or []:
                        ref = volume.get("pvcRef") or {}
                        if ref.get("name") == claim and ref.get("namespace") == self.namespace:
                            return int(volume.get("usedBytes") or 0)
        except (_NotFound, TransientBackendError, PermanentBackendError):
            return None
        return None

    # --- multi-node clusters ------------------------------------------------------------------------------

    def cluster_manifests(self, *, key: str, nodes: int, gpus_per_node: int, spec: InstanceSpec, command) -> list:
        return cluster_manifests(
            self.opts,
            alias=self.alias,
            key=key,
            spec=spec,
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            image=(spec.app.image if spec.app and spec.app.image else self.opts.image_for(spec.image)),
            command=tuple(command),
            env=spec.app.env if spec.app else (),
        )

    def cluster_create(self, *, key: str, nodes: int, gpus_per_node: int, spec: InstanceSpec, command) -> dict:
        """Create the cluster's Secret, home disk, Services, PodGroup (coscheduling), head and Job.

        What exists is kept: the Secret first, so a retry reads the tokens it holds. The volumes are
        checked first: a ReadWriteOnce claim cannot be written from several nodes.
        """
        self._cluster_volumes_check(spec, nodes)
        head_spec = _with_node(spec, "")
        tokens = self._ensure_workspace(key, head_spec)
        creators = {
            "Service": (self.core.create_namespaced_service, self.core.read_namespaced_service),
            "StatefulSet": (self.apps.create_namespaced_stateful_set, self.apps.read_namespaced_stateful_set),
            "Job": (self.batch.create_namespaced_job, self.batch.read_namespaced_job),
            "PodGroup": (self._create_pod_group, self._read_pod_group),
        }
        manifests = self.cluster_manifests(
            key=key, nodes=nodes, gpus_per_node=gpus_per_node, spec=spec, command=command
        )
        for manifest in manifests:
            create, read = creators[manifest["kind"]]
            label = LABEL_INSTANCE if manifest["kind"] == "StatefulSet" else LABEL_CLUSTER
            self._create(create, read, manifest, key=key, label=label)
        return {
            "v": STATE_VERSION,
            "namespace": self.namespace,
            "name": cluster_name(key),
            "nodes": nodes,
            "secrets": {LAB: tokens[LAB], CODE: tokens[CODE], APP: tokens.get(APP, "")},
        }

    def _ensure_workspace(self, key: str, spec: InstanceSpec) -> dict:
        """The Secret, the home disk and the instance's Service, shared by a machine and a cluster's head."""
        opts = self.opts
        tokens = {LAB: secrets.token_hex(24), CODE: secrets.token_hex(32), APP: secrets.token_hex(24)}
        secret = self._create(
            self.core.create_namespaced_secret,
            self.core.read_namespaced_secret,
            secret_manifest(opts, alias=self.alias, key=key, spec=spec, tokens=tokens),
            key=key,
        )
        tokens = _secret_tokens(secret) or tokens
        self._create(
            self.core.create_namespaced_persistent_volume_claim,
            self.core.read_namespaced_persistent_volume_claim,
            home_pvc_manifest(opts, alias=self.alias, key=key, spec=spec),
            key=key,
        )
        self._create(
            self.core.create_namespaced_service,
            self.core.read_namespaced_service,
            service_manifest(opts, alias=self.alias, key=key, spec=spec),
            key=key,
        )
        return tokens

    def _cluster_volumes_check(self, spec: InstanceSpec, nodes: int) -> None:
        """Every volume exists; one written by several nodes must be ReadWriteMany.

        A ReadWriteOnce claim attaches to one node: the other ranks' pods would wait forever
        ("Multi-Attach error"), so the cluster is refused up front with the reason.
        """
        for mount in spec.volumes:
            try:
                pvc = self._call(
                    self.core.read_namespaced_persistent_volume_claim, volume_name(mount.key), self.namespace
                )
            except _NotFound as exc:
                raise PermanentBackendError(f"The volume {mount.key} does not exist in this region.") from exc
            modes = (pvc.get("spec") or {}).get("accessModes") or []
            if nodes > 1 and not mount.read_only and "ReadWriteMany" not in modes:
                raise PermanentBackendError(
                    f"The volume {mount.key} ({', '.join(modes) or 'ReadWriteOnce'}) can be written from one node "
                    f"only; a cluster of {nodes} nodes may mount it read-only, or use a region whose storage is "
                    "shared (VOLUME_RWX)."
                )

    def _create_pod_group(self, namespace: str, body: dict, **kwargs):
        return self.custom.create_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", body, **kwargs
        )

    def _read_pod_group(self, name: str, namespace: str, **kwargs):
        return self.custom.get_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", name, **kwargs
        )

    def cluster_poll(self, *, key: str, state: dict) -> Observation:
        """RUNNING only when every node's pod (the head's and the workers') runs; a partial start is
        PENDING with how many are up; the head crash-looping is DEGRADED, as a single machine's pod."""
        try:
            job = self._call(self.batch.read_namespaced_job, cluster_name(key), self.namespace)
        except _NotFound:
            return Observation(Observed.GONE)
        except TransientBackendError as exc:
            return Observation(Observed.UNKNOWN, detail=str(exc)[:200])
        wanted = int((job.get("spec") or {}).get("parallelism") or 0)
        failed = _condition(job, "Failed")
        if failed.get("status") == "True":
            return Observation(Observed.GONE, detail=f"the cluster's job failed: {failed.get('message', '')}"[:200])
        try:
            self._call(self.apps.read_namespaced_stateful_set, instance_name(key), self.namespace)
        except _NotFound:
            return Observation(Observed.GONE, detail="the cluster's head was deleted")
        except TransientBackendError as exc:
            return Observation(Observed.UNKNOWN, detail=str(exc)[:200])
        wanted += 1  # the head
        if (job.get("spec") or {}).get("suspend"):
            return Observation(Observed.PENDING, detail="queued: waiting for the whole cluster to be admitted")
        try:
            pods = self._call(
                self.core.list_namespaced_pod, self.namespace, label_selector=f"{LABEL_CLUSTER}={key}"
            ).get("items")
        except TransientBackendError as exc:
            return Observation(Observed.UNKNOWN, detail=str(exc)[:200])
        head = next((p for p in pods or [] if LABEL_INSTANCE in ((p.get("metadata") or {}).get("labels") or {})), None)
        if head is not None and observe_pod(head).state == Observed.DEGRADED:
            return observe_pod(head)  # its workspace or app keeps crashing: the console's repair restarts it
        running = sum(1 for p in pods or [] if observe_pod(p).state == Observed.RUNNING)
        if running >= wanted > 0:
            return Observation(Observed.RUNNING)
        return Observation(Observed.PENDING, detail=f"{running} of {wanted} pods running")

    def cluster_destroy(self, *, key: str, state: dict) -> None:
        """Delete the Job, the head, both Services, the Secret and the home disk (and the PodGroup)."""
        self._forget(key)
        name = cluster_name(key)
        head = instance_name(key)
        self._delete(self.batch.delete_namespaced_job, name, propagation_policy="Background")
        self._delete(self.apps.delete_namespaced_stateful_set, head, propagation_policy="Background")
        self._delete(self.core.delete_namespaced_service, name)
        self._delete(self.core.delete_namespaced_service, head)
        self._delete(self.core.delete_namespaced_secret, f"{head}-secrets")
        self._delete(self.core.delete_namespaced_persistent_volume_claim, f"{head}-home")
        if self.opts.gang_scheduling == "coscheduling":
            with contextlib.suppress(_NotFound):
                self._call(
                    self.custom.delete_namespaced_custom_object,
                    "scheduling.x-k8s.io",
                    "v1alpha1",
                    self.namespace,
                    "podgroups",
                    name,
                )


# --- helpers ----------------------------------------------------------------------------------------------


def _with_node(spec: InstanceSpec, node: str) -> InstanceSpec:
    from dataclasses import replace

    return replace(spec, node=node or spec.node)


def _extra(state: dict) -> dict:
    return {k: v for k, v in state.items() if k not in ("v", "namespace", "name", "node", "gpus", "secrets")}


def _secret_tokens(secret: dict | None) -> dict:
    import base64

    data = (secret or {}).get("data") or {}
    try:
        return {
            LAB: base64.b64decode(data["jupyter-token"]).decode(),
            CODE: base64.b64decode(data["code-hash"]).decode(),
            APP: base64.b64decode(data.get("app-api-key", "")).decode(),
        }
    except (KeyError, ValueError):
        return {}


def _allocatable_gpus(node: dict) -> int:
    try:
        return int(((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE, 0))
    except (TypeError, ValueError):
        return 0


def _node_healthy(node: dict) -> bool:
    return _condition(node, "Ready").get("status") == "True" and not (node.get("spec") or {}).get("unschedulable")


_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "": 1}


def _gib(quantity: str) -> int:
    """A storage quantity in whole GiB, rounded up (``"50Gi"`` → 50, ``"1Ti"`` → 1024)."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|K|M|G|T|)", str(quantity).strip())
    if not match:
        raise PermanentBackendError(f"Unreadable storage size {quantity!r}.")
    size = float(match[1]) * _UNITS[match[2]]
    return int(-(-size // 2**30))


def _volume_state(pvc: dict, namespace: str) -> dict:
    spec = pvc.get("spec") or {}
    return {
        "v": STATE_VERSION,
        "namespace": namespace,
        "name": pvc["metadata"]["name"],
        "size_gb": _gib(spec["resources"]["requests"]["storage"]),
        "access_mode": (spec.get("accessModes") or ["ReadWriteOnce"])[0],
    }
