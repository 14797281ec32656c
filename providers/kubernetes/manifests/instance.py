"""A single machine's objects: the pod template (workspace, sidecars, security contexts, volumes), its
StatefulSet, Service, Secret and disks, a volume's PVC, and the tiers' PriorityClasses. Pure (no
client, no I/O); ``manifests.cluster`` builds a cluster's head and workers from the same pieces.
"""

from __future__ import annotations

import re
from typing import Any

from providers.base import InstanceSpec, PermanentBackendError
from providers.kubernetes.names import (
    ANNOTATION_APP_BASE,
    ANNOTATION_GPUS,
    ANNOTATION_NODE,
    ANNOTATION_WEBUI_BASE,
    APP,
    CODE,
    CONTAINER_PORTS,
    CONTRACT_UID,
    GPU_RESOURCE,
    LAB,
    LABEL_BACKEND,
    LABEL_INSTANCE,
    LABEL_MANAGED,
    LABEL_OWNER,
    LABEL_VOLUME,
    MANAGED_BY,
    SECRETS_MOUNT,
    SERVICE_PORTS,
    WEBUI,
    instance_name,
    volume_name,
)
from providers.kubernetes.options import TIER_INTERRUPTIBLE, TIER_ON_DEMAND, KubeOptions

FILES_MOUNT = SECRETS_MOUNT
# Every namespace carries its own name as this label (Kubernetes sets it): a policy selects one by it.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# The Secret's keys the workspace reads as files under FILES_MOUNT (mode 0440, group CONTRACT_UID):
# never as environment variables, which a process's children inherit and a saved image would keep.
SECRET_FILES = ("authorized_keys", "jupyter-token", "jupyter_server_config.py", "code-server.yaml")

# The workspace container's start command: start whichever of the configured servers the image has,
# and exit when one of them dies, so the kubelet restarts the container and a server that keeps dying
# shows as CrashLoopBackOff (poll: DEGRADED) instead of a pod that looks fine with nothing inside.
# Secrets never reach argv nor the environment: Jupyter's config file (mounted from the Secret) reads
# its token from the mounted file; code-server reads its password hash from its mounted config file.
# The servers run as the image's user (uid 1000, the pod's securityContext); their runtime files and
# sshd's host key live on /run, a tmpfs, so none of them is ever saved into an image.
WORKSPACE_SCRIPT = r"""
home="${CONSOLE_HOME:-/workspace}"
mkdir -p "$home" 2>/dev/null
pids=""
want() { case " $CONSOLE_SERVICES " in *" $1 "*) return 0;; esac; return 1; }
if want lab; then
  if command -v jupyter >/dev/null 2>&1; then
    jupyter lab --no-browser --ServerApp.ip=0.0.0.0 --ServerApp.port=8888 \
      --ServerApp.port_retries=0 "--ServerApp.base_url=$CONSOLE_LAB_BASE_URL" \
      "--ServerApp.root_dir=$home" --ServerApp.allow_remote_access=True \
      --LabApp.news_url= --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate \
      --config=/etc/console/jupyter_server_config.py &
    pids="$pids $!"
  else echo "console: this image has no jupyter; JupyterLab is off" >&2; fi
fi
if want code; then
  if command -v code-server >/dev/null 2>&1; then
    code-server --config /etc/console/code-server.yaml --bind-addr 0.0.0.0:8080 --auth password \
      --disable-telemetry --disable-update-check --disable-workspace-trust "$home" &
    pids="$pids $!"
  else echo "console: this image has no code-server; VS Code is off" >&2; fi
fi
if want ssh; then
  sshd_bin="$(command -v sshd || echo /usr/sbin/sshd)"
  if [ -x "$sshd_bin" ]; then
    # The host key is made once, on the instance's disk (outside the image), so a new pod (a stop and
    # start) shows the key the console's gateway pinned at its first connection, which refuses any
    # other; sshd reads it from /run (tmpfs), the copy private to the user it runs as (no privilege).
    mkdir -p "$home/.console-ssh" /run/sshd 2>/dev/null
    [ -f "$home/.console-ssh/host_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$home/.console-ssh/host_key"
    install -m 600 "$home/.console-ssh/host_key" /run/sshd/host_key
    "$sshd_bin" -D -e -p 2222 -h /run/sshd/host_key -o PidFile=/run/sshd/sshd.pid \
      -o AuthorizedKeysFile=/etc/console/authorized_keys -o PasswordAuthentication=no \
      -o KbdInteractiveAuthentication=no -o StrictModes=no -o UsePAM=no &
    pids="$pids $!"
  else echo "console: this image has no sshd; SSH is off" >&2; fi
fi
if [ -z "$pids" ]; then echo "console: none of the servers ($CONSOLE_SERVICES) is in this image" >&2; exit 1; fi
while :; do
  for p in $pids; do kill -0 "$p" 2>/dev/null || { echo "console: a server (pid $p) exited" >&2; exit 1; }; done
  sleep 5
done
"""

# The image contract's PID 1 is tini (it reaps the servers' orphans and forwards signals); the console's
# start script replaces the image's entrypoint, so it runs under the image's tini when there is one, and
# under the shell alone in an image built without it.
INIT_SCRIPT = (
    'if command -v tini >/dev/null 2>&1; then exec tini -s -- /bin/sh -c "$1" console-workspace; fi; '
    'exec /bin/sh -c "$1" console-workspace'
)

# An app's container: its key from the mounted Secret into its own environment, then its command.
APP_KEY_SCRIPT = 'APP_API_KEY="$(cat /etc/console/app-api-key 2>/dev/null)"; export APP_API_KEY; exec "$@"'

# The same Jupyter config the local runtime writes (providers.local.runtime.servers.JUPYTER_CONFIG).
JUPYTER_CONFIG = """# Written by the console's Kubernetes backend.
import pathlib

c.IdentityProvider.token = pathlib.Path("/etc/console/jupyter-token").read_text().strip()


def _without_token(handler, page_config):
    page_config["token"] = ""
    return page_config


c.ServerApp.tornado_settings = {"page_config_hook": _without_token}
"""


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


# A run without GPU (no-GPU mode): CUDA images set NVIDIA_VISIBLE_DEVICES=all, and on a node whose default
# runtime is NVIDIA's that would show every card of the node to a pod that asked for none; "void" shows none.
_NO_GPU_ENV = ({"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},)


def _resources(opts: KubeOptions, spec: InstanceSpec, gpus: int, *, fabric: bool = False) -> dict:
    """What the machine's main container asks for and may use: its GPUs, and the catalogue's CPU cores
    and RAM for them (``spec.cpus``, ``spec.memory_gb``; else ``CPU_PER_GPU`` / ``MEMORY_PER_GPU`` × the
    cards), requested and limited alike, so a process over its memory is killed in its own container
    and never starves another tenant's; the writable layer (ephemeral storage) is limited to the disk
    the owner pays for. ``fabric``: a cluster's rank, which also asks for the RDMA device plugin's
    resource (its HCAs) when ``RDMA_RESOURCE`` names one."""
    limits = {GPU_RESOURCE: str(gpus)} if gpus else {}  # none asked for at all in a run without GPU
    if fabric and opts.rdma_resource:
        limits[opts.rdma_resource] = str(opts.rdma_per_pod)  # extended resources: requests == limits
    # A cluster's rank has the spec of the whole machine per node: its share is per card.
    share = gpus / spec.gpu_count if spec.gpu_count else 1
    if spec.cpus:
        limits["cpu"] = _quantity(spec.cpus * share)
    elif opts.cpu_per_gpu:
        limits["cpu"] = _quantity_times(opts.cpu_per_gpu, gpus)
    if spec.memory_gb:
        limits["memory"] = f"{_quantity(spec.memory_gb * share)}Gi"
    elif opts.memory_per_gpu:
        limits["memory"] = _quantity_times(opts.memory_per_gpu, gpus)
    requests = dict(limits)
    if spec.disk_gb:
        limits["ephemeral-storage"] = f"{spec.disk_gb}Gi"
        # Asked for: what a node must have free to place it (the layer grows later, up to the limit).
        requests["ephemeral-storage"] = f"{min(spec.disk_gb, EPHEMERAL_REQUEST_GB)}Gi"
    return {"requests": requests, "limits": limits}


def _quantity(number: float) -> str:
    number = round(number, 3)
    return str(int(number)) if float(number).is_integer() else str(number)


# The writable layer each machine asks a node for (its limit is the owner's disk_gb).
EPHEMERAL_REQUEST_GB = 10
# The small containers beside the machine (an app's WebUI): bounded too, so no container is unlimited.
SIDECAR_RESOURCES = {
    "requests": {"cpu": "250m", "memory": "512Mi", "ephemeral-storage": "1Gi"},
    "limits": {"cpu": "2", "memory": "4Gi", "ephemeral-storage": "10Gi"},
}


def container_security_context() -> dict:
    """Every container of a tenant: the image's unprivileged user, no privilege to gain, no capability.

    sshd needs none: it runs as the user it logs in (uid 1000), on port 2222 (above 1024), never
    switching users, so neither SETUID/SETGID nor NET_BIND_SERVICE is added back."""
    return {
        "runAsNonRoot": True,
        "runAsUser": CONTRACT_UID,
        "runAsGroup": CONTRACT_UID,
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def pod_security_context() -> dict:
    """The pod's: the contract's user and group, its volumes' files group-owned by that group."""
    return {
        "runAsNonRoot": True,
        "runAsUser": CONTRACT_UID,
        "runAsGroup": CONTRACT_UID,
        "fsGroup": CONTRACT_UID,
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


# /run: a tmpfs (counted in the pod's memory) for the servers' runtime files and sshd's host key.
RUN_VOLUME = {"name": "run", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}}
RUN_MOUNT = {"name": "run", "mountPath": "/run"}
# The owner's secrets (``InstanceSpec.secrets``): a Secret of their own in the tenant's namespace,
# ``<name>-user-secrets``, each mounted read-only as the file USER_SECRETS_MOUNT/<NAME> (the image
# contract's folder) and, when asked, the variable NAME of the workspace by ``secretKeyRef``: the pod's
# spec names the keys, never a value. Optional, so a pod whose Secret was removed still starts.
USER_SECRETS_MOUNT = "/run/console-secrets"


def _user_secrets_env(key: str, spec: InstanceSpec) -> list[dict]:
    name = f"{instance_name(key)}-user-secrets"
    return [
        {"name": s.name, "valueFrom": {"secretKeyRef": {"name": name, "key": s.name, "optional": True}}}
        for s in spec.secrets
        if s.env
    ]


def _placement(opts: KubeOptions, *, gpu_model: str, node: str) -> dict:
    """The node selector on the GPU label, the pin to the console's chosen node, the GPU taint's toleration."""
    placement: dict[str, Any] = {
        "nodeSelector": {opts.gpu_label: opts.gpu_label_value(gpu_model)},
        # GPU node pools are often tainted so that only GPU pods land there (GKE, AKS do it).
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
    }
    if opts.pin_to_node and node:
        placement["affinity"] = node_affinity(node)
    return placement


def node_affinity(node: str) -> dict:
    """A pod's pin to one node: by node name (matchFields), not the hostname label, which need not
    equal the name."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
            }
        }
    }


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
    mounts = [
        {"name": "home", "mountPath": opts.disk_path},
        {"name": "console", "mountPath": FILES_MOUNT, "readOnly": True},
        RUN_MOUNT,
        *_volume_mounts(spec, opts),
    ]
    if spec.secrets:
        mounts.append({"name": "user-secrets", "mountPath": USER_SECRETS_MOUNT, "readOnly": True})
    services = [s for s in opts.services if s in CONTAINER_PORTS]
    workspace: dict[str, Any] = {
        "name": "workspace",
        "image": opts.image_for(spec.image, image_ref=spec.image_ref),
        "command": ["/bin/sh", "-c", INIT_SCRIPT, "console-init", WORKSPACE_SCRIPT],
        "workingDir": opts.disk_path,
        "env": [
            {"name": "CONSOLE_SERVICES", "value": " ".join(services)},
            {"name": "CONSOLE_HOME", "value": opts.disk_path},
            {"name": "CONSOLE_LAB_BASE_URL", "value": f"{base}/{LAB}/"},
            *(_NO_GPU_ENV if not spec.gpu_count else ()),
            *_user_secrets_env(key, spec),
        ],
        "ports": [{"name": s, "containerPort": CONTAINER_PORTS[s], "protocol": "TCP"} for s in services],
        "volumeMounts": mounts,
        "securityContext": container_security_context(),
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
        workspace["resources"] = _resources(opts, spec, spec.gpu_count)
    else:
        workspace["resources"] = SIDECAR_RESOURCES
    if spec.app is not None:
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
                "image": app.image or opts.image_for(spec.image, image_ref=spec.image_ref),
                # The server's own key (vLLM's --api-key $APP_API_KEY), which the console's proxy sends,
                # is read from the mounted Secret into the server's environment only: it is never in
                # the pod's spec, where anyone who may read the pod would see it.
                "command": ["/bin/sh", "-c", APP_KEY_SCRIPT, "console-app"],
                "args": argv,
                "env": [
                    *({"name": k, "value": fill(v)} for k, v in app.env),
                    {"name": "PORT", "value": str(app.port)},
                    {"name": "APP_BASE_PATH", "value": base_path},
                    *(_NO_GPU_ENV if not spec.gpu_count else ()),
                ],
                "ports": [{"name": APP, "containerPort": app.port, "protocol": "TCP"}],
                "resources": _resources(opts, spec, spec.gpu_count),
                "volumeMounts": [
                    {"name": "home", "mountPath": opts.disk_path},
                    {"name": "app-key", "mountPath": FILES_MOUNT, "readOnly": True},
                    RUN_MOUNT,
                    *_volume_mounts(spec, opts),
                ],
                "securityContext": container_security_context(),
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
                    "image": webui.image or opts.image_for(spec.image, image_ref=spec.image_ref),
                    "command": webui_argv[:1],
                    "args": webui_argv[1:],
                    "env": [
                        *({"name": k, "value": fill(v, webui_values)} for k, v in webui.env),
                        {"name": "PORT", "value": str(ui_port)},
                    ],
                    "ports": [{"name": WEBUI, "containerPort": ui_port, "protocol": "TCP"}],
                    # No GPUs: the WebUI talks to the server over the pod's loopback.
                    "resources": SIDECAR_RESOURCES,
                    "securityContext": container_security_context(),
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
                # Readable by the image's user (the pod's fsGroup), by nobody else, written by nobody.
                "defaultMode": 0o440,
                "items": [{"key": item, "path": item} for item in SECRET_FILES],
            },
        },
        RUN_VOLUME,
        *_user_volumes(opts, spec),
    ]
    if spec.secrets:
        volumes.append(
            {
                "name": "user-secrets",
                "secret": {"secretName": f"{name}-user-secrets", "defaultMode": 0o440, "optional": True},
            }
        )
    if spec.app is not None:
        volumes.append(
            {
                "name": "app-key",
                "secret": {
                    "secretName": f"{name}-secrets",
                    "defaultMode": 0o440,
                    "items": [{"key": "app-api-key", "path": "app-api-key"}],
                },
            }
        )
    pod_spec: dict[str, Any] = {
        "containers": containers,
        "volumes": volumes,
        # User code must not get the namespace's API credentials, nor every Service as env vars.
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": pod_security_context(),
        "terminationGracePeriodSeconds": 30,
        **_placement(opts, gpu_model=spec.gpu_model, node=spec.node),
        **_priority(opts, spec),
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


def _priority(opts: KubeOptions, spec: InstanceSpec) -> dict:
    """The pod's ``priorityClassName`` for its tier (``PRIORITY_CLASSES``), or nothing when not configured."""
    name = opts.priority_class_for(interruptible=spec.interruptible)
    return {"priorityClassName": name} if name else {}


def priority_class_manifests(
    opts: KubeOptions, *, on_demand_value: int = 100_000, interruptible_value: int = 1_000
) -> list[dict]:
    """The two tiers' PriorityClasses, for the cluster's admin to apply (they are cluster-scoped; the
    console's namespaced Role cannot make them). On-demand pods may preempt lower ones (spot pods);
    interruptible pods never preempt anything (``preemptionPolicy: Never``): they wait for free cards,
    as the console's own placement does. Empty when ``PRIORITY_CLASSES`` names none."""
    tiers = dict(opts.priority_classes)
    made = []
    for tier, value, policy, what in (
        (TIER_ON_DEMAND, on_demand_value, "PreemptLowerPriority", "on-demand GPU machines: they keep their cards"),
        (TIER_INTERRUPTIBLE, interruptible_value, "Never", "interruptible GPU machines: preempted for on-demand"),
    ):
        if tier in tiers:
            made.append(
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": tiers[tier], "labels": {LABEL_MANAGED: MANAGED_BY}},
                    "value": value,
                    "preemptionPolicy": policy,
                    "globalDefault": False,
                    "description": f"The console's {what}.",
                }
            )
    return made


def statefulset_manifest(opts: KubeOptions, *, alias: str, key: str, spec: InstanceSpec) -> dict:
    name = instance_name(key)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": name,
            "namespace": opts.tenant_namespace(spec.owner_ref),
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
            "namespace": opts.tenant_namespace(spec.owner_ref),
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
            "namespace": opts.tenant_namespace(spec.owner_ref),
            "labels": _labels(alias=alias, key=key, owner_ref=spec.owner_ref),
        },
        "type": "Opaque",
        "stringData": {
            "jupyter-token": tokens[LAB],
            "code-hash": tokens[CODE],
            "app-api-key": tokens.get(APP, ""),
            "authorized_keys": "".join(k.strip() + "\n" for k in spec.ssh_public_keys if k.strip()),
            "jupyter_server_config.py": JUPYTER_CONFIG,
            # code-server's own config file (--config): its password hash, read from the mount.
            "code-server.yaml": f'auth: password\nhashed-password: "{tokens[CODE]}"\n',
        },
    }


def user_secret_manifest(opts: KubeOptions, *, alias: str, key: str, spec: InstanceSpec) -> dict:
    """The owner's secrets for this boot, in the tenant's namespace: replaced at every start and restart
    with a spec, deleted when the machine stops or has none, so the cluster keeps them only while the
    machine runs. The backend's state never holds a value."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"{instance_name(key)}-user-secrets",
            "namespace": opts.tenant_namespace(spec.owner_ref),
            "labels": _labels(alias=alias, key=key, owner_ref=spec.owner_ref),
        },
        "type": "Opaque",
        "stringData": {s.name: s.value for s in spec.secrets},
    }


def home_pvc_manifest(opts: KubeOptions, *, alias: str, key: str, spec: InstanceSpec, from_snapshot: str = "") -> dict:
    """The instance's disk; ``from_snapshot``: a VolumeSnapshot of its namespace it starts as a copy of
    (a restore, or a clone's disk: ``spec.disk_from``)."""
    pvc_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": f"{spec.disk_gb}Gi"}},
    }
    if opts.storage_class:
        pvc_spec["storageClassName"] = opts.storage_class
    snapshot = from_snapshot or str((spec.disk_from or {}).get("snapshot") or "")
    if snapshot:
        pvc_spec["dataSource"] = {"name": snapshot, "kind": "VolumeSnapshot", "apiGroup": "snapshot.storage.k8s.io"}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": f"{instance_name(key)}-home",
            "namespace": opts.tenant_namespace(spec.owner_ref),
            "labels": _labels(alias=alias, key=key, owner_ref=spec.owner_ref),
        },
        "spec": pvc_spec,
    }


def volume_pvc_manifest(opts: KubeOptions, *, alias: str, key: str, size_gb: int, owner_ref: str) -> dict:
    """A volume's claim, in its owner's namespace: only that tenant's pods can mount it."""
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
            "namespace": opts.tenant_namespace(owner_ref),
            "labels": {LABEL_MANAGED: MANAGED_BY, LABEL_BACKEND: alias, LABEL_VOLUME: key},
        },
        "spec": pvc_spec,
    }


# --- a tenant's namespace and its fence ------------------------------------------------------------------
