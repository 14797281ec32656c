"""What the API's answers say: pods, StatefulSets, Jobs and nodes read into ``Observation``s, pure.

The backend fetches; these functions only read what it fetched, so each rule (a crash loop is
DEGRADED, a NotReady node is UNKNOWN, a half-started cluster is PENDING) is in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from providers.base import Observation, Observed
from providers.kubernetes.names import ANNOTATION_NODE, GPU_RESOURCE, LABEL_INSTANCE

_WAITING_BROKEN = {"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError"}


def condition(obj: dict, kind: str) -> dict:
    """An object's status condition of that type (``Ready``, ``Failed``…), or {} when it has none."""
    for found in (obj.get("status") or {}).get("conditions") or []:
        if found.get("type") == kind:
            return found
    return {}


def pod_ready(pod: dict) -> bool:
    return condition(pod, "Ready").get("status") == "True"


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
    if phase == "Running" and pod_ready(pod):
        return Observation(Observed.RUNNING)
    if phase == "Running":
        unready = [c.get("name") for c in status.get("containerStatuses") or [] if not c.get("ready")]
        return Observation(Observed.PENDING, detail=f"waiting for {', '.join(unready) or 'the pod'} to be ready")
    if phase in ("Failed", "Succeeded"):
        # A StatefulSet replaces a pod that ended (evicted, node shutdown): not gone, coming back.
        reason = status.get("reason") or phase
        return Observation(Observed.PENDING, detail=f"the pod ended ({reason}); it is being replaced")
    scheduled = condition(pod, "PodScheduled")
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


def observe_machine(
    sts: dict, pod: dict | None, node_of: Callable[[str], dict | None], *, pin_to_node: bool
) -> Observation:
    """A single machine: its StatefulSet, its pod (None when there is none) and, when the pod is not
    running, its node (``node_of`` reads one by name; None when the cluster has no such node)."""
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
        ((sts.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_NODE, "") if pin_to_node else ""
    )
    if node_name:
        node = node_of(node_name)
        if node is None:
            return Observation(Observed.GONE, detail=f"node {node_name} was removed from the cluster")
        if condition(node, "Ready").get("status") != "True":
            return Observation(Observed.UNKNOWN, detail=f"node {node_name} is not reporting (NotReady)")
    return seen


def observe_cluster_pods(pods: list[dict], *, wanted: int) -> Observation:
    """A started cluster (its Job admitted, its head there) from its pods: RUNNING only when all
    ``wanted`` run; the head crash-looping is DEGRADED, as a single machine's pod."""
    head = next((p for p in pods if LABEL_INSTANCE in ((p.get("metadata") or {}).get("labels") or {})), None)
    if head is not None and observe_pod(head).state == Observed.DEGRADED:
        return observe_pod(head)  # its workspace or app keeps crashing: the console's repair restarts it
    running = sum(1 for p in pods if observe_pod(p).state == Observed.RUNNING)
    if running >= wanted > 0:
        return Observation(Observed.RUNNING)
    return Observation(Observed.PENDING, detail=f"{running} of {wanted} pods running")


def observe_cluster_job(job: dict, *, head: Observed | None) -> Observed:
    """A cluster from its workers' Job and what its head was seen doing (None: it has no head), as
    the machine list reads it: from the Job's counts, without listing the workers' pods."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    wanted = int(spec.get("parallelism") or 0)
    if condition(job, "Failed").get("status") == "True" or head is None:
        return Observed.GONE
    if head == Observed.DEGRADED:
        return Observed.DEGRADED
    if wanted and int(status.get("ready") or status.get("active") or 0) >= wanted:
        return Observed.RUNNING if head == Observed.RUNNING else Observed.PENDING
    return Observed.PENDING


def cluster_job_cards(job: dict) -> int:
    """The cards a cluster holds: its workers' (the Job's pods) and its head's, as many each."""
    spec = job.get("spec") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or [{}]
    limits = (containers[0].get("resources") or {}).get("limits") or {}
    per_node = int(limits.get(GPU_RESOURCE, 0) or 0)
    return per_node * (int(spec.get("parallelism") or 0) + 1)


def allocatable_gpus(node: dict) -> int:
    try:
        return int(((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE, 0))
    except (TypeError, ValueError):
        return 0


def node_healthy(node: dict) -> bool:
    return condition(node, "Ready").get("status") == "True" and not (node.get("spec") or {}).get("unschedulable")
