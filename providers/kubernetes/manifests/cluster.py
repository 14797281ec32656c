"""A multi-node cluster's objects (the package's docstring draws them): the head's StatefulSet, the workers'
Indexed Job, the headless Service, and the gang scheduling's PodGroup or Kueue labels. Pure, as the
single machine's builders (``manifests.instance``) it reuses.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from providers.base import InstanceSpec, PermanentBackendError
from providers.kubernetes.manifests.instance import (
    RUN_MOUNT,
    RUN_VOLUME,
    _app_values,
    _fill,
    _placement,
    _priority,
    _resources,
    _user_volumes,
    _volume_mounts,
    container_security_context,
    pod_security_context,
    statefulset_manifest,
)
from providers.kubernetes.names import (
    GPU_RESOURCE,
    KUEUE_LABEL,
    KUEUE_PRIORITY_LABEL,
    LABEL_BACKEND,
    LABEL_CLUSTER,
    LABEL_MANAGED,
    LABEL_OWNER,
    MANAGED_BY,
    POD_GROUP_LABEL,
    cluster_name,
    instance_name,
)
from providers.kubernetes.options import KubeOptions

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
        # The fabric's settings (NCCL_SOCKET_IFNAME, NCCL_IB_HCA…) on every rank.
        *({"name": k, "value": v} for k, v in opts.nccl_env),
    ]
    rendezvous_port = {"name": "rendezvous", "containerPort": MASTER_PORT, "protocol": "TCP"}
    manifests: list[dict] = [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": opts.tenant_namespace(spec.owner_ref), "labels": labels},
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
    gpu_container["resources"] = _resources(opts, head_spec, gpus_per_node, fabric=True)  # with the ranks' RDMA

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
        "securityContext": pod_security_context(),
        "containers": [
            {
                "name": "worker",
                "image": image or opts.image_for(spec.image, image_ref=spec.image_ref),
                "command": ["/bin/sh", "-c", WORKER_RANK_SCRIPT, "console-worker"],
                "args": worker_argv,
                "env": [*cluster_env, *({"name": k, "value": v} for k, v in worker_env)],
                "ports": [rendezvous_port],
                "resources": _resources(opts, spec, gpus_per_node, fabric=True),
                "volumeMounts": [RUN_MOUNT, *_volume_mounts(spec, opts)],
                "securityContext": container_security_context(),
            }
        ],
        "volumes": [RUN_VOLUME, *_user_volumes(opts, spec)],
        **_placement(opts, gpu_model=spec.gpu_model, node=""),
        **_priority(opts, spec),
    }
    if opts.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": s} for s in opts.image_pull_secrets]
    job_metadata: dict[str, Any] = {
        "name": name,
        "namespace": opts.tenant_namespace(spec.owner_ref),
        "labels": dict(labels),
    }
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
        # StatefulSet outside the queue, placed like a single-node machine (see the package's docstring).
        job_metadata["labels"][KUEUE_LABEL] = opts.kueue_queue
        workload_priority = opts.kueue_priority_class_for(interruptible=spec.interruptible)
        if workload_priority:  # Kueue orders (and preempts) admitted workloads by it
            job_metadata["labels"][KUEUE_PRIORITY_LABEL] = workload_priority
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
                "metadata": {"name": name, "namespace": opts.tenant_namespace(spec.owner_ref), "labels": labels},
                "spec": {"minMember": nodes, "scheduleTimeoutSeconds": 600},
            }
        )
    manifests.append(head)
    manifests.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": job_metadata, "spec": job_spec})
    return manifests
