"""What the console's objects are called in the cluster: labels, annotations, ports and names.

Every other module of the backend reads these; this one reads nothing of theirs.
"""

from __future__ import annotations

import re

from providers.base import PermanentBackendError

MANAGED_BY = "gpu-console"
LABEL_MANAGED = "app.kubernetes.io/managed-by"
LABEL_BACKEND = "console.gpu/backend"
LABEL_INSTANCE = "console.gpu/instance"
LABEL_OWNER = "console.gpu/owner"
LABEL_VOLUME = "console.gpu/volume"
LABEL_CLUSTER = "console.gpu/cluster"
LABEL_TENANT = "console.gpu/tenant"  # on a tenant's namespace: whose it is (``InstanceSpec.owner_ref``)
ANNOTATION_STOPPED = "console.gpu/stopped"  # on a cluster's Service: its Job was deleted by a stop
ANNOTATION_NODE = "console.gpu/node"
ANNOTATION_GPUS = "console.gpu/gpus"
ANNOTATION_APP_BASE = "console.gpu/app-serves-base-path"
ANNOTATION_WEBUI_BASE = "console.gpu/webui-serves-base-path"
GPU_RESOURCE = "nvidia.com/gpu"
KUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"  # a Job's WorkloadPriorityClass
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
JOB_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"

LAB, CODE, SSH, APP, WEBUI = "lab", "code", "ssh", "app", "webui"
# The image contract: JupyterLab, code-server and sshd run as this user (and group) inside the image.
CONTRACT_UID = 1000
TENANT_NAMESPACE_PREFIX = "gpuc-"
# Where the console mounts the instance's secrets (read-only) and its start script's runtime files (tmpfs).
SECRETS_MOUNT = "/etc/console"
# Ports inside the pod; sshd listens on 2222 so an image that runs as a user can start it too.
CONTAINER_PORTS = {LAB: 8888, CODE: 8080, SSH: 2222}
SERVICE_PORTS = {LAB: 8888, CODE: 8080, SSH: 22}

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


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


def tenant_namespace(owner_ref: str, *, prefix: str = TENANT_NAMESPACE_PREFIX) -> str:
    """The namespace of one tenant's machines, volumes and secrets: ``prefix`` and the owner's reference
    (``user-42`` → ``gpuc-user-42``), as a DNS label. The one place the name is derived: every object of
    the tenant is made, found and deleted there.

    No owner, no namespace: a machine without a tenant would have to share one, so it is refused. The
    reference is used as it is, never folded (``User_1`` and ``user-1`` must not share a namespace)."""
    if not owner_ref:
        raise PermanentBackendError("An instance needs an owner to get a namespace of its own.")
    name = f"{prefix}{owner_ref}"
    if len(name) > 63 or not _DNS_LABEL.match(name):
        raise PermanentBackendError(f"The owner {owner_ref!r} cannot name a Kubernetes namespace.")
    return name
