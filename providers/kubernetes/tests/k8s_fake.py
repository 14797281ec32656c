"""A fake Kubernetes API server for the tests: the subset the Kubernetes backend uses, behaving as the
real one does where the backend depends on it.

It speaks HTTP on 127.0.0.1 to the official client (through a kubeconfig it writes, with a bearer
token it checks), and it is strict:

- every object it is sent (created, or the result of a patch) is validated against the Kubernetes
  OpenAPI schema with ``kubernetes-validate`` (strict: an unknown field is an error), and names and
  label values against the API server's own rules; a bad one is refused with 422 Invalid;
- creating what exists is 409 AlreadyExists, reading or deleting what does not is 404 NotFound,
  each with the ``Status`` body the real server sends;
- patches are JSON merge patches (RFC 7386) or JSON patches (RFC 6902); a storage request may
  not shrink;
- lists take label selectors; ``?watch=true`` streams JSON event lines (ADDED/MODIFIED/DELETED),
  first the objects that exist (no ``resourceVersion``) or the events after the one given (410
  Gone when that is too old);
- controllers run after each write: a StatefulSet gets its pods ``<name>-<i>`` (scaled down: they
  go), an Indexed Job its pods per index (none while suspended), pods bound by a scheduler that
  honours node selectors, node-name affinity and allocatable ``nvidia.com/gpu``; a scheduler-plugins
  PodGroup binds its pods all or none; a node that stops reporting marks its pods not ready, a
  deleted node's pods are collected (and a StatefulSet recreates them, unschedulable).

What a kubelet does is the test's lever: ``advance()`` starts every bound pending pod (running and
ready, or crash-looping when its image is in ``crashing_images``, or not ready for containers in
``unready_containers``). ``fail_next(status)`` makes the next requests fail; ``stop()`` takes the
server down (connection refused).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import queue
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import jsonschema
import kubernetes_validate

K8S_VERSION = "1.37"
# The images the tests' regions map (OPTIONS["IMAGES"]): console image slug -> container image.
IMAGES = {
    "pytorch-2.5-cu124": "registry.local/workspace/pytorch:2.5.1-cuda12.4",
    "pytorch": "registry.local/workspace/pytorch:latest",
    "x": "registry.local/workspace/minimal:1",
}
IMAGES_OPTION = tuple(IMAGES.items())
TOKEN = "fake-cluster-token"

# plural -> (group path, version, kind, namespaced)
RESOURCES = {
    "pods": ("", "v1", "Pod", True),
    "services": ("", "v1", "Service", True),
    "secrets": ("", "v1", "Secret", True),
    "persistentvolumeclaims": ("", "v1", "PersistentVolumeClaim", True),
    "nodes": ("", "v1", "Node", False),
    "namespaces": ("", "v1", "Namespace", False),
    "resourcequotas": ("", "v1", "ResourceQuota", True),
    "networkpolicies": ("networking.k8s.io", "v1", "NetworkPolicy", True),
    "rolebindings": ("rbac.authorization.k8s.io", "v1", "RoleBinding", True),
    "statefulsets": ("apps", "v1", "StatefulSet", True),
    "jobs": ("batch", "v1", "Job", True),
    "podgroups": ("scheduling.x-k8s.io", "v1alpha1", "PodGroup", True),
    # The CSI snapshot CRD: served only while ``FakeCluster.snapshot_api`` (a cluster may not have it).
    "volumesnapshots": ("snapshot.storage.k8s.io", "v1", "VolumeSnapshot", True),
}
VOLUME_SNAPSHOT_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "snapshot.storage.k8s.io/v1"},
        "kind": {"const": "VolumeSnapshot"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["source"],
            "properties": {
                "volumeSnapshotClassName": {"type": "string"},
                "source": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "persistentVolumeClaimName": {"type": "string"},
                        "volumeSnapshotContentName": {"type": "string"},
                    },
                },
            },
        },
    },
}
# The scheduler-plugins CRD (kubernetes-validate knows only built-in kinds): its spec as JSON schema.
POD_GROUP_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "scheduling.x-k8s.io/v1alpha1"},
        "kind": {"const": "PodGroup"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["minMember"],
            "properties": {
                "minMember": {"type": "integer", "minimum": 1},
                "minResources": {"type": "object", "additionalProperties": {"type": ["string", "integer"]}},
                "scheduleTimeoutSeconds": {"type": "integer", "minimum": 1},
            },
        },
        "status": {"type": "object"},
    },
}
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
GPU = "nvidia.com/gpu"


def validate_manifest(obj: dict) -> None:
    """Raise ``ValueError`` with the reason when ``obj`` is not a valid object of its kind."""
    if obj.get("kind") in ("PodGroup", "VolumeSnapshot"):
        try:
            jsonschema.validate(obj, POD_GROUP_SCHEMA if obj["kind"] == "PodGroup" else VOLUME_SNAPSHOT_SCHEMA)
        except jsonschema.ValidationError as exc:
            raise ValueError(exc.message) from exc
    else:
        try:
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.absolute_path) or "(root)"
            raise ValueError(f"{path}: {exc.message}") from exc
        except kubernetes_validate.SchemaNotFoundError as exc:
            raise ValueError(f"unknown kind {obj.get('kind')} in {obj.get('apiVersion')}") from exc
    meta = obj.get("metadata") or {}
    name = meta.get("name", "")
    rule = _DNS_1035 if obj.get("kind") == "Service" else _DNS_SUBDOMAIN
    if not name or len(name) > (63 if obj.get("kind") == "Service" else 253) or not rule.match(name):
        raise ValueError(f"metadata.name: Invalid value: {name!r}: not a valid {obj.get('kind')} name")
    for label, value in (meta.get("labels") or {}).items():
        prefix, _, short = label.rpartition("/")
        if (prefix and not _DNS_SUBDOMAIN.match(prefix)) or not _LABEL_NAME.match(short) or len(short) > 63:
            raise ValueError(f"metadata.labels: Invalid value: {label!r}")
        if len(value) > 63 or not _LABEL_VALUE.match(value):
            raise ValueError(f"metadata.labels: Invalid value: {value!r}: a label value must be 63 characters or less")
    if obj.get("kind") == "StatefulSet":
        selector = (obj["spec"].get("selector") or {}).get("matchLabels") or {}
        labels = ((obj["spec"]["template"].get("metadata") or {}).get("labels")) or {}
        if any(labels.get(k) != v for k, v in selector.items()):
            raise ValueError("spec.template.metadata.labels: Invalid value: `selector` does not match template")
    if obj.get("kind") in ("StatefulSet", "Job", "Pod"):
        pod = obj if obj["kind"] == "Pod" else obj["spec"]["template"]
        names = [c["name"] for c in pod["spec"]["containers"]]
        if len(set(names)) != len(names):
            raise ValueError("spec.containers: Duplicate value")
        for container in pod["spec"]["containers"]:
            resources = container.get("resources") or {}
            limit, request = (resources.get("limits") or {}).get(GPU), (resources.get("requests") or {}).get(GPU)
            if request is not None and limit != request:
                # Extended resources cannot be overcommitted: the API server insists on this.
                raise ValueError(f"resources.requests[{GPU}]: Invalid value: must be equal to {GPU} limit")


def restricted_violations(pod_spec: dict) -> list[str]:
    """What in ``pod_spec`` the ``restricted`` Pod Security Standard forbids (as the API server's
    PodSecurity admission checks it in a namespace labelled ``pod-security.kubernetes.io/enforce``)."""
    found = []
    pod_ctx = pod_spec.get("securityContext") or {}
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if pod_spec.get(flag):
            found.append(f"{flag}=true")
    allowed_volumes = {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
    for volume in pod_spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= allowed_volumes:
            found.append(f"volume {volume['name']} of type {sorted(kinds)}")
    for container in [*pod_spec.get("initContainers", []), *pod_spec["containers"]]:
        ctx = container.get("securityContext") or {}
        name = container["name"]
        if ctx.get("privileged"):
            found.append(f"{name}: privileged")
        if ctx.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation != false")
        caps = ctx.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            found.append(f"{name}: capabilities.drop does not include ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            found.append(f"{name}: capabilities.add {caps['add']}")
        if not ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot")):
            found.append(f"{name}: runAsNonRoot != true")
        if ctx.get("runAsUser", pod_ctx.get("runAsUser")) == 0:
            found.append(f"{name}: runAsUser=0")
        seccomp = (ctx.get("seccompProfile") or pod_ctx.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}: seccompProfile.type {seccomp!r}")
    return found


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _status(code: int, reason: str, message: str, **details) -> dict:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure" if code >= 400 else "Success",
        "message": message,
        "reason": reason,
        "details": details,
        "code": code,
    }


def parse_selector(text: str):
    """A label selector (``a=b,c!=d,e,!f,g in (x,y)``) as a predicate on a labels dict."""
    clauses: list[tuple[str, str, set[str]]] = []  # (operator, key, values)
    for part in re.findall(r"[^,(]+(?:\([^)]*\))?", text or ""):
        part = part.strip()
        if not part:
            continue
        if match := re.fullmatch(r"(\S+)\s+(in|notin)\s+\(([^)]*)\)", part):
            clauses.append((match[2], match[1], {v.strip() for v in match[3].split(",")}))
        elif "!=" in part:
            key, value = part.split("!=", 1)
            clauses.append(("notin", key.strip(), {value.strip()}))
        elif "=" in part:
            key, value = part.replace("==", "=").split("=", 1)
            clauses.append(("in", key.strip(), {value.strip()}))
        elif part.startswith("!"):
            clauses.append(("absent", part[1:].strip(), set()))
        else:
            clauses.append(("exists", part, set()))

    def holds(labels: dict, operator: str, key: str, values: set[str]) -> bool:
        if operator == "in":
            return labels.get(key) in values
        if operator == "notin":
            return labels.get(key) not in values
        if operator == "absent":
            return key not in labels
        return key in labels

    return lambda labels: all(holds(labels or {}, *clause) for clause in clauses)


def merge_patch(target, patch):
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: dict, operations: list) -> dict:
    """RFC 6902 add/replace/remove/test (what the backend sends)."""
    doc = copy.deepcopy(target)
    for op in operations:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if op["op"] == "add":
                parent.insert(index, op["value"])
            elif op["op"] == "replace":
                parent[index] = op["value"]
            elif op["op"] == "remove":
                parent.pop(index)
            continue
        if op["op"] in ("replace", "remove", "test") and last not in parent:
            raise KeyError(op["path"])
        if op["op"] == "test":
            if parent[last] != op["value"]:
                raise ValueError(f"test failed at {op['path']}")
        elif op["op"] == "remove":
            del parent[last]
        else:
            parent[last] = copy.deepcopy(op["value"])
    return doc


def _gpu_request(pod: dict) -> int:
    return sum(
        int(((c.get("resources") or {}).get("requests") or {}).get(GPU, 0)) for c in pod["spec"].get("containers", [])
    )


def _storage_bytes(quantity: str) -> float:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "": 1}
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([A-Za-z]*)", quantity)
    return float(match[1]) * units[match[2]]


class FakeCluster:
    """The API server's state, its controllers and the tests' levers. Thread-safe (one lock)."""

    def __init__(self, *, namespace: str = "gpu-console") -> None:
        self.namespace = namespace
        self.lock = threading.RLock()
        self.objects: dict[tuple[str, str, str], dict] = {}  # (plural, namespace, name) -> object
        self.rv = 100
        self.events: list[tuple[int, str, str, dict]] = []  # (rv, type, plural, object)
        self.watchers: list[tuple[str, str, object, queue.Queue]] = []
        self.requests: list[tuple[str, str, str]] = []  # (verb, group, resource) as RBAC names them
        self.scoped_requests: list[tuple[str, str, str, str]] = []  # and the namespace
        self.bodies: list[dict] = []  # every object the backend sent, as sent
        self.failures: list[int] = []
        self.refused: list[tuple[int, str]] = []  # the 4xx answers to bodies it judged invalid
        self.crashes: list[str] = []  # the fake's own errors: fake_api_server fails the test on any
        # Cleared, every request waits until it is set again (or the fake stops): a server that does
        # not answer, for as long as the test needs, however slow the machine is.
        self.answering = threading.Event()
        self.answering.set()
        self.crashing_images: set[str] = set()
        self.unready_containers: set[str] = set()
        self.gang_schedulers: set[str] = set()  # schedulerName values that honour PodGroups
        self.volume_usage: dict[str, int] = {}  # claim name -> used bytes (the kubelet's stats)
        self.snapshot_api = True  # serves snapshot.storage.k8s.io/v1 (False: a cluster without the CRDs)
        self.dcgm_texts: dict[str, str] = {}  # node -> what its DCGM exporter serves (add_dcgm_exporter)
        self.events_kept = 1000
        self.stopped = threading.Event()
        self.connections: set = set()
        # The namespaces a cluster starts with (the console's own, the GPU Operator's, the DNS's).
        for existing in dict.fromkeys((namespace, "gpu-operator", "kube-system")):
            self._put(
                "namespaces",
                "",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": existing}},
                "ADDED",
            )

    # --- the tests' levers ------------------------------------------------------------------------------

    def add_node(
        self, name: str, *, product: str = "NVIDIA-H200", gpus: int = 8, label: str = "nvidia.com/gpu.product"
    ) -> dict:
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, label: product}},
            "spec": {},
            "status": {
                "capacity": {"cpu": "128", "memory": "2Ti", GPU: str(gpus)},
                "allocatable": {"cpu": "126", "memory": "1900Gi", GPU: str(gpus)},
                "conditions": [self._ready_condition(True)],
            },
        }
        with self.lock:
            self._put("nodes", "", node, "ADDED")
            self._reconcile()
        return node

    @staticmethod
    def _ready_condition(ready: bool) -> dict:
        return {
            "type": "Ready",
            "status": "True" if ready else "Unknown",
            "reason": "KubeletReady" if ready else "NodeStatusUnknown",
            "message": "kubelet is posting ready status" if ready else "Kubelet stopped posting node status.",
            "lastHeartbeatTime": _now(),
            "lastTransitionTime": _now(),
        }

    def node_set_ready(self, name: str, ready: bool) -> None:
        """The kubelet stops (or resumes) reporting; the node controller marks its pods not ready."""
        with self.lock:
            node = copy.deepcopy(self.objects[("nodes", "", name)])
            node["status"]["conditions"] = [self._ready_condition(ready)]
            self._put("nodes", "", node, "MODIFIED")
            if not ready:
                for pod in self._pods(lambda p: p["spec"].get("nodeName") == name):
                    self._set_pod_ready(pod, False)
            self._reconcile()

    def node_cordon(self, name: str, cordoned: bool = True) -> None:
        with self.lock:
            node = copy.deepcopy(self.objects[("nodes", "", name)])
            node["spec"]["unschedulable"] = cordoned
            self._put("nodes", "", node, "MODIFIED")

    def node_delete(self, name: str) -> None:
        """The node is removed; the pod garbage collector deletes the pods bound to it."""
        with self.lock:
            self._remove("nodes", "", name)
            for pod in self._pods(lambda p: p["spec"].get("nodeName") == name):
                self._remove("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
            self._reconcile()

    def advance(self) -> None:
        """The kubelets: every bound pending pod starts (ready, unready or crash-looping); the snapshot
        controller: every VolumeSnapshot becomes ready, as large as its claim."""
        with self.lock:
            for (plural, namespace, _name), snap in list(self.objects.items()):
                if plural != "volumesnapshots" or (snap.get("status") or {}).get("readyToUse"):
                    continue
                claim = self.objects.get(
                    ("persistentvolumeclaims", namespace, snap["spec"]["source"].get("persistentVolumeClaimName", ""))
                )
                snap = copy.deepcopy(snap)
                snap["status"] = {
                    "readyToUse": claim is not None,
                    "restoreSize": (claim or {})
                    .get("spec", {})
                    .get("resources", {})
                    .get("requests", {})
                    .get("storage", "0"),
                    **({} if claim else {"error": {"message": "the source claim does not exist"}}),
                }
                self._put("volumesnapshots", namespace, snap, "MODIFIED")
            for pod in self._pods(lambda p: p["status"].get("phase") == "Pending" and p["spec"].get("nodeName")):
                pod = copy.deepcopy(pod)
                statuses = []
                for container in pod["spec"]["containers"]:
                    status = {
                        "name": container["name"],
                        "image": container["image"],
                        "imageID": f"docker-pullable://{container['image']}@sha256:{'0' * 64}",
                        "restartCount": 0,
                        "started": True,
                        "ready": container["name"] not in self.unready_containers,
                        "state": {"running": {"startedAt": _now()}},
                    }
                    if container["image"] in self.crashing_images:
                        status.update(
                            ready=False,
                            started=False,
                            restartCount=4,
                            state={"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s restarting"}},
                            lastState={
                                "terminated": {
                                    "exitCode": 1,
                                    "reason": "Error",
                                    "message": "console: none of the servers (lab code ssh) is in this image\n",
                                }
                            },
                        )
                    statuses.append(status)
                ready = all(s["ready"] for s in statuses)
                pod["status"].update(
                    phase="Running",
                    podIP="10.0.0.7",
                    startTime=_now(),
                    containerStatuses=statuses,
                    conditions=[
                        {"type": "PodScheduled", "status": "True"},
                        {"type": "Initialized", "status": "True"},
                        {"type": "ContainersReady", "status": "True" if ready else "False"},
                        {"type": "Ready", "status": "True" if ready else "False"},
                    ],
                )
                self._put("pods", pod["metadata"]["namespace"], pod, "MODIFIED")
            self._reconcile()

    def container_set_ready(self, container: str, ready: bool = True) -> None:
        """A readiness probe starts (or stops) passing for ``container`` in every running pod."""
        with self.lock:
            if ready:
                self.unready_containers.discard(container)
            else:
                self.unready_containers.add(container)
            for pod in self._pods(lambda p: p["status"].get("phase") == "Running"):
                pod = copy.deepcopy(pod)
                for status in pod["status"].get("containerStatuses") or []:
                    if status["name"] == container:
                        status["ready"] = ready
                all_ready = all(s["ready"] for s in pod["status"].get("containerStatuses") or [])
                for condition in pod["status"]["conditions"]:
                    if condition["type"] in ("Ready", "ContainersReady"):
                        condition["status"] = "True" if all_ready else "False"
                self._put("pods", pod["metadata"]["namespace"], pod, "MODIFIED")

    def job_admit(self, name: str, namespace: str | None = None) -> None:
        """What Kueue does once the whole Job fits its quota: unsuspend it."""
        with self.lock:
            job = copy.deepcopy(self.get("jobs", name, namespace))
            namespace = job["metadata"]["namespace"]
            job["spec"]["suspend"] = False
            self._put("jobs", namespace, job, "MODIFIED")
            self._reconcile()

    def add_namespace(self, name: str, labels: dict | None = None) -> dict:
        """A namespace an administrator made (or a tenant's, made ahead of the backend)."""
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}}
        with self.lock:
            return self._put("namespaces", "", namespace, "ADDED")

    def add_claim(
        self,
        name: str,
        *,
        access_modes: tuple[str, ...] = ("ReadOnlyMany",),
        size: str = "1Ti",
        namespace: str | None = None,
    ) -> dict:
        """A claim an administrator made (the public models' ReadOnlyMany claim), already bound."""
        namespace = namespace or self.namespace
        claim = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"accessModes": list(access_modes), "resources": {"requests": {"storage": size}}},
        }
        validate_manifest(claim)
        claim["status"] = {"phase": "Bound", "capacity": {"storage": size}}
        with self.lock:
            self._put("persistentvolumeclaims", namespace, claim, "ADDED")
            self._reconcile()
        return claim

    def endpoints(self, service: str, namespace: str | None = None) -> list[str]:
        """The pods a Service sends traffic to, as the EndpointSlice controller picks them: those its
        selector matches, ready ones only unless it publishes not-ready addresses."""
        with self.lock:
            svc = self.get("services", service, namespace)
            assert svc is not None, f"no Service {service}"
            namespace = svc["metadata"]["namespace"]
            selector = svc["spec"].get("selector") or {}
            if not selector:
                return []  # a Service without a selector gets no endpoints from the controller
            match = parse_selector(",".join(f"{k}={v}" for k, v in selector.items()))
            return sorted(
                p["metadata"]["name"]
                for p in self._pods(lambda p: p["metadata"]["namespace"] == namespace)
                if match(p["metadata"].get("labels"))
                and p["status"].get("podIP")
                and (svc["spec"].get("publishNotReadyAddresses") or _ready(p))
            )

    def fail_next(self, status: int, times: int = 1) -> None:
        self.failures.extend([status] * times)

    def get(self, plural: str, name: str, namespace: str | None = None) -> dict | None:
        """The object ``name``: in ``namespace``, or when none is given the only one of that name in any
        namespace (tenants' objects live in namespaces of their own; a name in two is an error)."""
        with self.lock:
            if not RESOURCES[plural][3]:
                found = self.objects.get((plural, "", name))
            elif namespace is not None:
                found = self.objects.get((plural, namespace, name))
            else:
                matches = [o for (p, _, n), o in self.objects.items() if p == plural and n == name]
                assert len(matches) <= 1, f"{plural} {name} is in {len(matches)} namespaces"
                found = matches[0] if matches else None
            return copy.deepcopy(found) if found else None

    def list(self, plural: str) -> list[dict]:
        with self.lock:
            return [copy.deepcopy(o) for (p, _, _), o in sorted(self.objects.items()) if p == plural]

    def names(self, plural: str) -> list[str]:
        return [o["metadata"]["name"] for o in self.list(plural)]

    # --- storage ------------------------------------------------------------------------------------------

    def _put(self, plural: str, namespace: str, obj: dict, event: str) -> dict:
        self.rv += 1
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(self.rv)
        if event == "ADDED":
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", _now())
            if plural in ("statefulsets", "jobs"):
                meta["generation"] = 1
        if namespace:
            meta["namespace"] = namespace
        self.objects[(plural, namespace, meta["name"])] = obj
        self._emit(event, plural, obj)
        return obj

    def _remove(self, plural: str, namespace: str, name: str) -> dict | None:
        obj = self.objects.pop((plural, namespace, name), None)
        if obj is not None:
            self.rv += 1
            obj = copy.deepcopy(obj)
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self._emit("DELETED", plural, obj)
        return obj

    def _emit(self, event: str, plural: str, obj: dict) -> None:
        snapshot = copy.deepcopy(obj)
        self.events.append((self.rv, event, plural, snapshot))
        del self.events[: -self.events_kept]
        for w_plural, w_namespace, match, sink in list(self.watchers):
            in_scope = w_plural == plural and w_namespace in ("", snapshot["metadata"].get("namespace", ""))
            if in_scope and match((snapshot["metadata"].get("labels")) or {}):
                sink.put((event, snapshot))

    def _pods(self, predicate) -> list[dict]:
        return [o for (p, _, _), o in list(self.objects.items()) if p == "pods" and predicate(o)]

    def _set_pod_ready(self, pod: dict, ready: bool) -> None:
        pod = copy.deepcopy(pod)
        for condition in pod["status"].get("conditions") or []:
            if condition["type"] in ("Ready", "ContainersReady"):
                condition["status"] = "True" if ready else "False"
        self._put("pods", pod["metadata"]["namespace"], pod, "MODIFIED")

    # --- controllers ----------------------------------------------------------------------------------------

    def _reconcile(self) -> None:
        for (plural, namespace, _), sts in list(self.objects.items()):
            if plural == "statefulsets":
                self._statefulset_controller(namespace, sts)
            elif plural == "jobs":
                self._job_controller(namespace, sts)
        self._schedule()

    def _owned(self, owner: dict) -> list[dict]:
        uid = owner["metadata"]["uid"]
        return self._pods(lambda p: any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or []))

    def _new_pod(self, namespace: str, owner: dict, name: str, template: dict, extra_labels: dict) -> dict:
        template = copy.deepcopy(template)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {**(template.get("metadata", {}).get("labels") or {}), **extra_labels},
                "annotations": dict(template.get("metadata", {}).get("annotations") or {}),
                "ownerReferences": [
                    {
                        "apiVersion": owner["apiVersion"],
                        "kind": owner["kind"],
                        "name": owner["metadata"]["name"],
                        "uid": owner["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": template["spec"],
            "status": {"phase": "Pending", "conditions": []},
        }
        pod["spec"].setdefault("schedulerName", "default-scheduler")
        return pod

    def _statefulset_controller(self, namespace: str, sts: dict) -> None:
        name, replicas = sts["metadata"]["name"], sts["spec"].get("replicas", 1)
        pods = {p["metadata"]["name"]: p for p in self._owned(sts)}
        for index in range(replicas):
            pod_name = f"{name}-{index}"
            if pod_name not in pods:
                labels = {"apps.kubernetes.io/pod-index": str(index), "statefulset.kubernetes.io/pod-name": pod_name}
                pod = self._new_pod(namespace, sts, pod_name, sts["spec"]["template"], labels)
                # The pod's DNS name is <pod>.<serviceName>: the controller sets both.
                pod["spec"]["hostname"] = pod_name
                pod["spec"]["subdomain"] = sts["spec"]["serviceName"]
                self._put("pods", namespace, pod, "ADDED")
        for pod_name in pods:
            if int(pod_name.rsplit("-", 1)[1]) >= replicas:
                self._remove("pods", namespace, pod_name)
        ready = sum(1 for p in self._owned(sts) if _ready(p))
        status = {"replicas": len(self._owned(sts)), "readyReplicas": ready, "availableReplicas": ready}
        if sts.get("status") != status:
            sts["status"] = status
            self._put("statefulsets", namespace, sts, "MODIFIED")

    def _job_controller(self, namespace: str, job: dict) -> None:
        if job["spec"].get("suspend"):
            return
        name = job["metadata"]["name"]
        existing = {p["metadata"]["labels"].get("batch.kubernetes.io/job-completion-index") for p in self._owned(job)}
        for index in range(job["spec"].get("parallelism", 1)):
            if str(index) in existing:
                continue
            template = copy.deepcopy(job["spec"]["template"])
            template["spec"]["hostname"] = f"{name}-{index}"
            template.setdefault("metadata", {}).setdefault("annotations", {})[
                "batch.kubernetes.io/job-completion-index"
            ] = str(index)
            labels = {
                "batch.kubernetes.io/job-name": name,
                "batch.kubernetes.io/controller-uid": job["metadata"]["uid"],
                "batch.kubernetes.io/job-completion-index": str(index),
            }
            pod = self._new_pod(namespace, job, f"{name}-{index}-{uuid.uuid4().hex[:5]}", template, labels)
            self._put("pods", namespace, pod, "ADDED")
        # The Job's status counts its pods as the controller does: active (not ended) and ready.
        owned = [p for p in self._owned(job) if p["status"].get("phase") not in ("Succeeded", "Failed")]
        status = {**(job.get("status") or {}), "active": len(owned), "ready": sum(1 for p in owned if _ready(p))}
        if job.get("status") != status:
            job["status"] = status
            self._put("jobs", namespace, job, "MODIFIED")

    def _node_fits(self, node: dict, pod: dict, extra_used: dict[str, int]) -> str:
        """'' when ``pod`` fits on ``node``, else why not (as the scheduler words it)."""
        name = node["metadata"]["name"]
        if (c := [c for c in node["status"]["conditions"] if c["type"] == "Ready"]) and c[0]["status"] != "True":
            return "node(s) had untolerated taint {node.kubernetes.io/unreachable: }"
        if node["spec"].get("unschedulable"):
            return "node(s) were unschedulable"
        labels = node["metadata"].get("labels") or {}
        if any(labels.get(k) != v for k, v in (pod["spec"].get("nodeSelector") or {}).items()):
            return "node(s) didn't match Pod's node affinity/selector"
        required = (
            ((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            )
            or {}
        ).get("nodeSelectorTerms") or []
        for term in required:
            for field in term.get("matchFields") or []:
                if field["key"] == "metadata.name" and name not in field["values"]:
                    return "node(s) didn't match Pod's node affinity/selector"
        for volume in pod["spec"].get("volumes") or []:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim and ("persistentvolumeclaims", pod["metadata"]["namespace"], claim) not in self.objects:
                return f'persistentvolumeclaim "{claim}" not found'
        used = extra_used.get(name, 0) + sum(
            _gpu_request(p)
            for p in self._pods(lambda p: p["spec"].get("nodeName") == name and p["status"].get("phase") != "Succeeded")
        )
        if used + _gpu_request(pod) > int(node["status"]["allocatable"].get(GPU, 0)):
            return f"Insufficient {GPU}"
        return ""

    def _place(self, pod: dict, extra_used: dict[str, int]) -> tuple[str, str]:
        nodes = [o for (p, _, _), o in sorted(self.objects.items()) if p == "nodes"]
        reasons: dict[str, int] = {}
        for node in nodes:
            why = self._node_fits(node, pod, extra_used)
            if not why:
                return node["metadata"]["name"], ""
            reasons[why] = reasons.get(why, 0) + 1
        detail = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
        return "", f"0/{len(nodes)} nodes are available: {detail or 'no nodes'}."

    def _bind(self, pod: dict, node: str) -> None:
        pod = copy.deepcopy(pod)
        pod["spec"]["nodeName"] = node
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
        pod["status"]["containerStatuses"] = [
            {
                "name": c["name"],
                "image": c["image"],
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "started": False,
                "state": {"waiting": {"reason": "ContainerCreating"}},
            }
            for c in pod["spec"]["containers"]
        ]
        self._put("pods", pod["metadata"]["namespace"], pod, "MODIFIED")

    def _unschedulable(self, pod: dict, message: str) -> None:
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
        if pod["status"].get("conditions") != [condition]:
            pod = copy.deepcopy(pod)
            pod["status"]["conditions"] = [condition]
            self._put("pods", pod["metadata"]["namespace"], pod, "MODIFIED")

    def _schedule(self) -> None:
        waiting = self._pods(lambda p: not p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp"))
        groups: dict[str, list[dict]] = {}
        for pod in sorted(waiting, key=lambda p: p["metadata"]["name"]):
            scheduler = pod["spec"].get("schedulerName", "default-scheduler")
            group = (pod["metadata"].get("labels") or {}).get("scheduling.x-k8s.io/pod-group")
            if scheduler != "default-scheduler":
                # No such scheduler runs: the pod waits, with no event at all (as in a real cluster).
                if scheduler in self.gang_schedulers and group:
                    groups.setdefault(group, []).append(pod)
                continue
            node, why = self._place(pod, {})
            if node:
                self._bind(pod, node)
            else:
                self._unschedulable(pod, why)
        for group, pods in groups.items():
            spec = self.get("podgroups", group, pods[0]["metadata"]["namespace"])
            members = (spec or {}).get("spec", {}).get("minMember", len(pods))
            plan, extra = [], {}
            for pod in pods:
                node, _ = self._place(pod, extra)
                if not node:
                    break
                plan.append((pod, node))
                extra[node] = extra.get(node, 0) + _gpu_request(pod)
            if len(plan) >= members:
                for pod, node in plan:
                    self._bind(pod, node)
            else:
                for pod in pods:
                    self._unschedulable(pod, f'pod group "{group}": {len(plan)} of {members} members fit; none bound')

    # --- the HTTP API -----------------------------------------------------------------------------------------

    def handle(self, method: str, path: str, query: dict, body: bytes, content_type: str):
        """(status, object) or (200, Iterator) for a watch."""
        while not self.answering.is_set() and not self.stopped.is_set():
            self.answering.wait(0.1)  # wall-clock: not a limit, a poll of `stopped` while held silent
        if self.failures:
            code = self.failures.pop(0)
            return code, _status(code, "InternalError" if code >= 500 else "TooManyRequests", "injected failure")
        if path == "/version":
            return 200, {"major": "1", "minor": "37", "gitVersion": "v1.37.0-fake"}
        route = self._route(path)
        if route is None:
            return 404, _status(404, "NotFound", "the server could not find the requested resource")
        plural, namespace, name, sub = route
        if plural == "volumesnapshots" and not self.snapshot_api:
            return 404, _status(404, "NotFound", "the server could not find the requested resource")
        group, version, kind, namespaced = RESOURCES[plural]
        verb = {"GET": "get" if name else "list", "POST": "create", "PATCH": "patch", "DELETE": "delete"}[method]
        if verb == "list" and query.get("watch", [""])[0].lower() in ("true", "1"):
            verb = "watch"
        self.requests.append((verb, group, f"{plural}/{sub}" if sub else plural))
        # The same, with the namespace it was made in ("" for cluster-scoped and all-namespace requests).
        self.scoped_requests.append((verb, group, f"{plural}/{sub}" if sub else plural, namespace))
        label = f"{plural}.{group}" if group else plural
        with self.lock:
            if sub == "proxy":
                return self._pod_proxy(namespace, name) if plural == "pods" else self._node_proxy(name)
            if verb in ("list", "watch"):
                match = parse_selector(query.get("labelSelector", [""])[0])
                if verb == "watch":
                    return 200, self._watch(plural, namespace, match, query)
                items = [
                    copy.deepcopy(o)
                    for (p, ns, _), o in sorted(self.objects.items())
                    if p == plural
                    and (not namespaced or not namespace or ns == namespace)
                    and match(o["metadata"].get("labels"))
                ]
                return 200, {
                    "kind": f"{kind}List",
                    "apiVersion": f"{group}/{version}" if group else version,
                    "metadata": {"resourceVersion": str(self.rv)},
                    "items": items,
                }
            key = (plural, namespace if namespaced else "", name)
            if verb == "create":
                obj = json.loads(body)
                self.bodies.append(copy.deepcopy(obj))
                name = (obj.get("metadata") or {}).get("name", "")
                if namespaced and obj.get("metadata", {}).get("namespace", namespace) != namespace:
                    return 400, _status(400, "BadRequest", "the namespace of the object does not match the request")
                try:
                    validate_manifest(obj)
                except ValueError as exc:
                    self.refused.append((422, str(exc)))
                    return 422, _status(422, "Invalid", f'{kind} "{name}" is invalid: {exc}', name=name, kind=plural)
                key = (plural, namespace if namespaced else "", name)
                if namespaced and ("namespaces", "", namespace) not in self.objects:
                    return 404, _status(404, "NotFound", f'namespaces "{namespace}" not found', kind="namespaces")
                if kind in ("StatefulSet", "Job", "Pod"):
                    ns_labels = self.objects[("namespaces", "", namespace)]["metadata"].get("labels") or {}
                    if ns_labels.get("pod-security.kubernetes.io/enforce") == "restricted":
                        pod_spec = obj["spec"] if kind == "Pod" else obj["spec"]["template"]["spec"]
                        if violations := restricted_violations(pod_spec):
                            self.refused.append((403, "; ".join(violations)))
                            return 403, _status(
                                403,
                                "Forbidden",
                                f'{kind} "{name}" violates PodSecurity "restricted:latest": ' + "; ".join(violations),
                            )
                if key in self.objects:
                    return 409, _status(
                        409, "AlreadyExists", f'{label} "{name}" already exists', name=name, group=group, kind=plural
                    )
                if kind == "Secret" and "stringData" in obj:
                    data = obj.setdefault("data", {})
                    for k, v in obj.pop("stringData").items():
                        data[k] = base64.b64encode(v.encode()).decode()
                if kind == "PersistentVolumeClaim":
                    obj["status"] = {"phase": "Bound", "capacity": dict(obj["spec"]["resources"]["requests"])}
                if kind == "Service" and obj["spec"].get("clusterIP") != "None":
                    obj["spec"]["clusterIP"] = f"10.96.0.{len(self.objects) % 250 + 2}"
                    if obj["spec"].get("type") == "NodePort":
                        for index, port in enumerate(obj["spec"]["ports"]):
                            port.setdefault("nodePort", 30000 + (self.rv + index) % 2000)
                if kind in ("Pod", "StatefulSet", "Job"):
                    obj.setdefault("status", {"phase": "Pending"} if kind == "Pod" else {})
                created = self._put(plural, key[1], obj, "ADDED")
                self._reconcile()
                return 201, copy.deepcopy(self.objects.get(key, created))
            current = self.objects.get(key)
            if current is None:
                return 404, _status(404, "NotFound", f'{label} "{name}" not found', name=name, group=group, kind=plural)
            if verb == "get":
                return 200, copy.deepcopy(current)
            if verb == "delete":
                options = json.loads(body) if body else {}
                policy = query.get("propagationPolicy", [options.get("propagationPolicy", "")])[0]
                removed = self._remove(*key)
                # Jobs orphan their pods unless told otherwise (the batch/v1 default); other owners cascade.
                if kind == "Job" and policy not in ("Background", "Foreground"):
                    pass
                elif policy != "Orphan":
                    for pod in self._owned(removed):
                        self._remove("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
                self._reconcile()
                return 200, removed
            # patch
            patch = json.loads(body)
            self.bodies.append({"patch": copy.deepcopy(patch), "kind": kind, "name": name})
            try:
                if content_type.startswith("application/merge-patch+json"):
                    updated = merge_patch(current, patch)
                elif content_type.startswith("application/json-patch+json"):
                    updated = json_patch(current, patch)
                else:
                    return 415, _status(415, "UnsupportedMediaType", f"the fake speaks no {content_type}")
            except (KeyError, IndexError, ValueError, TypeError) as exc:
                return 422, _status(422, "Invalid", f"the patch does not apply: {exc}")
            try:
                validate_manifest(updated)
                self._immutable(kind, current, updated)
            except ValueError as exc:
                self.refused.append((422, str(exc)))
                return 422, _status(422, "Invalid", f'{kind} "{name}" is invalid: {exc}', name=name, kind=plural)
            if kind in ("StatefulSet", "Job") and updated.get("spec") != current.get("spec"):
                updated["metadata"]["generation"] = current["metadata"].get("generation", 1) + 1
            if kind == "PersistentVolumeClaim":
                updated["status"]["capacity"] = dict(updated["spec"]["resources"]["requests"])
            self._put(plural, key[1], updated, "MODIFIED")
            self._reconcile()
            return 200, copy.deepcopy(self.objects[key])

    @staticmethod
    def _immutable(kind: str, old: dict, new: dict) -> None:
        if kind == "PersistentVolumeClaim":
            before = _storage_bytes(old["spec"]["resources"]["requests"]["storage"])
            after = _storage_bytes(new["spec"]["resources"]["requests"]["storage"])
            if after < before:
                raise ValueError(
                    "spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"
                )
            if old["spec"].get("accessModes") != new["spec"].get("accessModes"):
                raise ValueError("spec: Forbidden: spec is immutable after creation except resources.requests")
        if kind == "StatefulSet":
            for field in ("selector", "serviceName", "podManagementPolicy", "volumeClaimTemplates"):
                if old["spec"].get(field) != new["spec"].get(field):
                    raise ValueError(
                        f"spec: Forbidden: updates to statefulset spec for fields other than ... ({field})"
                    )
        if kind == "Job" and old["spec"]["template"] != new["spec"]["template"]:
            raise ValueError("spec.template: Invalid value: field is immutable")

    def add_dcgm_exporter(self, node: str, text: str = "", *, namespace: str = "gpu-operator") -> dict:
        """NVIDIA's DCGM exporter on ``node`` (the GPU Operator's DaemonSet pod), serving ``text`` as its
        metrics through the pods' proxy; ``dcgm_texts[node]`` changes what it serves."""
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"nvidia-dcgm-exporter-{node}", "labels": {"app": "nvidia-dcgm-exporter"}},
            "spec": {"nodeName": node, "containers": [{"name": "nvidia-dcgm-exporter", "image": "dcgm-exporter"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        }
        with self.lock:
            self.dcgm_texts[node] = text
            return self._put("pods", namespace, pod, "ADDED")

    def _pod_proxy(self, namespace: str, name: str):
        """``GET pods/<name>:<port>/proxy/metrics``: what a DCGM exporter pod serves (text, not JSON)."""
        pod = self.objects.get(("pods", namespace, unquote(name).split(":")[0]))  # "name:port", escaped
        node = pod and pod["spec"].get("nodeName")
        if node not in self.dcgm_texts:
            return 404, _status(404, "NotFound", f'pods "{name}" not found')
        return 200, self.dcgm_texts[node].encode()

    def _node_proxy(self, name: str):
        node = self.objects.get(("nodes", "", name))
        if node is None:
            return 404, _status(404, "NotFound", f'nodes "{name}" not found')
        pods = []
        for pod in self._pods(lambda p: p["spec"].get("nodeName") == name):
            volumes = []
            for volume in pod["spec"].get("volumes") or []:
                claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
                if claim:
                    volumes.append(
                        {
                            "name": volume["name"],
                            "usedBytes": self.volume_usage.get(claim, 0),
                            "pvcRef": {"name": claim, "namespace": pod["metadata"]["namespace"]},
                        }
                    )
            pods.append({"podRef": {"name": pod["metadata"]["name"]}, "volume": volumes})
        return 200, {"node": {"nodeName": name}, "pods": pods}

    def _route(self, path: str):
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            rest = parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            rest = parts[3:]
            group = parts[1]
            if not rest:
                return None
        else:
            return None
        namespace = ""
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        if not rest or rest[0] not in RESOURCES:
            return None
        plural = rest[0]
        expected_group = RESOURCES[plural][0]
        if (parts[0] == "api" and expected_group) or (parts[0] == "apis" and group != expected_group):
            return None
        name = rest[1] if len(rest) > 1 else ""
        sub = "/".join(rest[2:]) if len(rest) > 2 else ""
        if sub.startswith("proxy"):
            sub = "proxy"
        elif sub:
            return None
        return plural, namespace, name, sub

    def _watch(self, plural: str, namespace: str, match, query: dict) -> Iterator[dict]:
        sink: queue.Queue = queue.Queue()
        since = query.get("resourceVersion", [""])[0]
        timeout = float(query.get("timeoutSeconds", ["30"])[0])
        initial: list[tuple[str, dict]] = []
        if since and since != "0":
            since_rv = int(since)
            if self.events and self.events[0][0] > since_rv + 1:
                gone = _status(410, "Expired", f"too old resource version: {since} ({self.events[0][0]})")
                initial.append(("ERROR", gone))
            else:
                for rv, event, p, obj in self.events:
                    in_scope = p == plural and namespace in ("", obj["metadata"].get("namespace", ""))
                    if rv > since_rv and in_scope and match(obj["metadata"].get("labels")):
                        initial.append((event, obj))
        else:
            for (p, ns, _), obj in sorted(self.objects.items()):
                if p == plural and (not namespace or ns in (namespace, "")) and match(obj["metadata"].get("labels")):
                    initial.append(("ADDED", copy.deepcopy(obj)))
        watcher = (plural, namespace, match, sink)
        self.watchers.append(watcher)

        def events() -> Iterator[dict]:
            try:
                for event, obj in initial:
                    yield {"type": event, "object": obj}
                    if event == "ERROR":
                        return
                deadline = time.monotonic() + timeout
                while (left := deadline - time.monotonic()) > 0:
                    try:
                        event, obj = sink.get(timeout=min(left, 0.1))
                    except queue.Empty:
                        if self.stopped.is_set():
                            return
                        continue
                    yield {"type": event, "object": obj}
            finally:
                with self.lock, contextlib.suppress(ValueError):
                    self.watchers.remove(watcher)

        return events()


def _ready(pod: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or [])


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go in two writes: no 40 ms delayed-ACK stall
    cluster: FakeCluster

    def log_message(self, *args) -> None:  # quiet
        pass

    def setup(self) -> None:
        super().setup()
        self.cluster.connections.add(self.connection)

    def finish(self) -> None:
        self.cluster.connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._send(401, _status(401, "Unauthorized", "Unauthorized"))
            return
        try:
            status, payload = self.cluster.handle(
                method, url.path, parse_qs(url.query), body, self.headers.get("Content-Type", "")
            )
        except Exception as exc:  # a bug in the fake: answer as a server would, and fail the test after
            self.cluster.crashes.append(f"{method} {url.path}: {exc!r}")
            status, payload = 500, _status(500, "InternalError", f"the fake failed: {exc!r}")
        if isinstance(payload, dict):
            self._send(status, payload)
            return
        if isinstance(payload, bytes):  # a pod's own answer through the proxy
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in payload:
                chunk = (json.dumps(event) + "\n").encode()
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with contextlib.suppress(Exception):
                payload.close()

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")


class FakeApiServer:
    """The fake cluster served on 127.0.0.1 (a random port) with a kubeconfig that reaches it."""

    def __init__(self, directory: Path, *, namespace: str = "gpu-console") -> None:
        self.cluster = FakeCluster(namespace=namespace)
        handler = type("Handler", (_Handler,), {"cluster": self.cluster})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.kubeconfig = directory / "kubeconfig"
        self.kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                    "users": [{"name": "console", "user": {"token": TOKEN}}],
                    "contexts": [
                        {"name": "fake", "context": {"cluster": "fake", "user": "console", "namespace": namespace}}
                    ],
                    "current-context": "fake",
                }
            )
        )
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Take the API server down: connections are refused from now on."""
        self.cluster.stopped.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        # Kept-alive connections too: a client's pooled connection must fail like a fresh one.
        for connection in list(self.cluster.connections):
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def fake_api_server(directory: Path, **kwargs) -> Iterator[FakeApiServer]:
    server = FakeApiServer(directory, **kwargs)
    try:
        yield server
    finally:
        with contextlib.suppress(Exception):
            server.stop()
    assert not server.cluster.crashes, f"the fake API server failed: {server.cluster.crashes}"
