"""A Kubernetes cluster as a provider: an instance is a StatefulSet of one GPU pod.

Each tenant's objects live in a namespace of their own, ``gpuc-<owner_ref>`` (``names.tenant_namespace``),
made before their first object with the console's RoleBinding, a default-deny NetworkPolicy and the
``restricted`` Pod Security Standard (``manifests.tenant_manifests``); a release deletes the instance's
objects and leaves the namespace. What each console object is in it (all labelled
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
                                      password hash, the SSH keys (mounted read-only as files, never env)
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

A real fabric (``NCCL_ENV``, ``RDMA_RESOURCE``): every rank of a cluster (the head's GPU container and
each worker) gets NCCL's environment and asks for ``RDMA_PER_POD`` of the RDMA device plugin's resource
(``rdma/hca_shared_devices_a`` for the shared-device plugin), so the ranks reach the InfiniBand or RoCE
HCAs; a single machine asks for neither. The two tiers (``PRIORITY_CLASSES``): every pod carries its
tier's ``priorityClassName``, so the scheduler preempts interruptible pods for on-demand ones and never
the other way (``priority_class_manifests``: the two classes, interruptible with ``preemptionPolicy:
Never``, applied by the cluster's admin: they are cluster-scoped); with Kueue the workers' Job also
carries its tier's WorkloadPriorityClass (``KUEUE_PRIORITY_CLASSES``).

A running cluster is not resized (no ``ClusterResizeCapability``): the workers' Indexed Job could be
scaled (``completions`` with ``parallelism``), but every rank's ``NNODES`` is in the Job's pod template,
which is immutable, and the ranks already running were started for the old world size; the console
refuses with ``resize_not_supported``.

Every call may be repeated: creating what exists (409 AlreadyExists) returns what is there;
deleting what is gone (404) is done. The API answering 5xx, 429 or not at all raises
``TransientBackendError`` (and ``poll`` says UNKNOWN, never GONE); a request it refuses as invalid
raises ``PermanentBackendError`` with the API server's own message.

Configuration: ``PROVISIONING_BACKENDS[alias]["OPTIONS"]``, read by ``options.KubeOptions``
(its docstring lists them; see also the README, "Kubernetes backend").

The package's modules import one way, each only from those above it in this list::

    names        labels, annotations, ports and the objects' names (inst-…, clu-…, vol-…)
    options      OPTIONS, parsed and checked once (KubeOptions)
    manifests    pure builders of what the backend sends: no client, no I/O (instance, cluster, tenant)
    observation  pure readers of what the API answers (pods, nodes, Jobs) into ``Observation``
    client       KubeClient: the API client, its errors, tenants' namespaces, what every machine shares
    volumes      KubeVolumes: volumes as PVCs
    clusters     KubeClusters: a head and a Job of workers, whole
    backend      KubernetesBackend: the ProvisioningBackend calls for single machines, over the three
"""

from __future__ import annotations

from providers.kubernetes.backend import KubernetesBackend
from providers.kubernetes.manifests import (
    cluster_manifests,
    home_pvc_manifest,
    pod_template,
    priority_class_manifests,
    secret_manifest,
    service_manifest,
    statefulset_manifest,
    user_secret_manifest,
    volume_pvc_manifest,
    webui_port,
)
from providers.kubernetes.names import cluster_name, instance_name, volume_name
from providers.kubernetes.observation import PodEvent, observe_pod
from providers.kubernetes.options import KubeOptions

__all__ = [
    "KubeOptions",
    "KubernetesBackend",
    "PodEvent",
    "cluster_manifests",
    "cluster_name",
    "home_pvc_manifest",
    "instance_name",
    "observe_pod",
    "pod_template",
    "priority_class_manifests",
    "secret_manifest",
    "service_manifest",
    "statefulset_manifest",
    "user_secret_manifest",
    "volume_name",
    "volume_pvc_manifest",
    "webui_port",
]
