"""What the backend sends: every object built from the options and the spec, pure (no client, no I/O),
so the tests validate each against the Kubernetes schema without a cluster.

    instance   a single machine's objects (pod template, StatefulSet, Service, Secret, PVCs) and the
               tiers' PriorityClasses; the pieces the others reuse
    cluster    a multi-node cluster's head, workers' Job, headless Service and gang scheduling
    tenant     a tenant's namespace and its fence
"""

from providers.kubernetes.manifests.cluster import cluster_manifests
from providers.kubernetes.manifests.instance import (
    home_pvc_manifest,
    node_affinity,
    pod_template,
    priority_class_manifests,
    secret_manifest,
    service_manifest,
    statefulset_manifest,
    user_secret_manifest,
    volume_pvc_manifest,
    webui_port,
)
from providers.kubernetes.manifests.tenant import tenant_manifests

__all__ = [
    "cluster_manifests",
    "home_pvc_manifest",
    "node_affinity",
    "pod_template",
    "priority_class_manifests",
    "secret_manifest",
    "service_manifest",
    "statefulset_manifest",
    "tenant_manifests",
    "user_secret_manifest",
    "volume_pvc_manifest",
    "webui_port",
]
