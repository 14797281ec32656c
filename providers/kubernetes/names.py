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
