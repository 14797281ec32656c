"""The backend's OPTIONS, read once into ``KubeOptions``, with their defaults and their checks.

``PROVISIONING_BACKENDS[alias]["OPTIONS"]`` (see the README, "Kubernetes backend")::

    "KUBECONFIG": "/etc/console/kubeconfig",   # default: $KUBECONFIG or ~/.kube/config
    "CONTEXT": "",                             # default: the kubeconfig's current context
    "IN_CLUSTER": False,                       # True: the console runs in a pod (service account)
    "NAMESPACE": "gpu-console",                # default: the context's namespace, else "default"
    "REGION": "k8s-1", "REGION_NAME": "…",     # the console region this cluster is
    "GPU_LABEL": "nvidia.com/gpu.product",     # the node label that names a node's GPU model
    "GPU_MODELS": {"h200": "NVIDIA-H200"},     # console GPU slug -> that label's value
    "IMAGES": {"pytorch-2.5-cu124": "registry/pytorch:2.5"},  # console image slug -> container image;
                                               # an image not named here is refused, never replaced
    # True when the cluster's nodes pull from the console's registry (CONSOLE_REGISTRY): every pod then runs the
    # launch's pinned reference (repository@sha256:…), saved images included, and IMAGES is not needed.
    "CONSOLE_REGISTRY_PULLS": False,
    # Each tenant's machines live in a namespace of their own, <prefix><owner> (names.tenant_namespace),
    # fenced by a NetworkPolicy (manifests.tenant_manifests): ingress only from the console's pods that
    # PROXY_POD_LABELS select in NAMESPACE, egress to DNS (DNS_NAMESPACE / DNS_POD_LABELS) and to any
    # address outside EGRESS_DENY_CIDRS (the private ranges: the cluster's pods and Services, the nodes,
    # the cloud's metadata service), plus the tenant's own pods (a cluster's ranks talk to each other).
    "TENANT_NAMESPACE_PREFIX": "gpuc-",
    "PROXY_POD_LABELS": {"app.kubernetes.io/name": "gpu-console"},
    "DNS_NAMESPACE": "kube-system", "DNS_POD_LABELS": {"k8s-app": "kube-dns"},
    "EGRESS_DENY_CIDRS": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16"],
    "TENANT_QUOTA": {"requests.nvidia.com/gpu": "16"},  # optional: a ResourceQuota's hard limits per tenant
    # The console's rights in a tenant's namespace: a RoleBinding there of this ClusterRole to this service
    # account of NAMESPACE (deploy/kubernetes/console-rbac.yaml); "" when the console has them cluster-wide.
    "TENANT_ROLE": "gpu-console-tenant", "SERVICE_ACCOUNT": "gpu-console",
    "STORAGE_CLASS": "", "VOLUME_STORAGE_CLASS": "", "VOLUME_RWX": False,
    "PUBLIC_VOLUMES": {"/models": "public-models"},  # ReadOnlyMany claims mounted read-only in every pod
    "SERVICES": ["lab", "code", "ssh"],        # what the workspace container starts
    "PIN_TO_NODE": True, "SERVICE_TYPE": "ClusterIP",  # NodePort: SSH and an out-of-cluster proxy
    "SSH_USER": "root",                        # the user the image's sshd logs in (NodePort/LoadBalancer)
    "PROXY_HOST": "{service}.{namespace}.svc", # where the console's proxy reaches a Service
    "GANG_SCHEDULING": "", "KUEUE_QUEUE": "", "COSCHEDULING_SCHEDULER": "scheduler-plugins-scheduler",
    "REQUEST_TIMEOUT_S": 10,
    # A real fabric, on a cluster's pods only (head and workers): NCCL's environment, and the RDMA
    # device plugin's resource (k8s-rdma-shared-dev-plugin, or the SR-IOV one) requested per pod.
    "NCCL_ENV": {"NCCL_SOCKET_IFNAME": "net1", "NCCL_IB_HCA": "mlx5"},
    "RDMA_RESOURCE": "rdma/hca_shared_devices_a", "RDMA_PER_POD": 1,
    # The two tiers' PriorityClasses (cluster-scoped: applied by the cluster's admin from
    # ``manifests.priority_class_manifests``); every pod carries its tier's ``priorityClassName``.
    "PRIORITY_CLASSES": {"on-demand": "gpu-on-demand", "interruptible": "gpu-spot"},
    # With Kueue: the workers' Job carries its tier's WorkloadPriorityClass (kueue.x-k8s.io/priority-class).
    "KUEUE_PRIORITY_CLASSES": {"on-demand": "gpu-on-demand", "interruptible": "gpu-spot"},
"""

from __future__ import annotations

import ipaddress
import logging
import re
from dataclasses import dataclass

from django.conf import settings

from providers.base import PermanentBackendError
from providers.kubernetes.names import CODE, CONTAINER_PORTS, LAB, SSH, TENANT_NAMESPACE_PREFIX, tenant_namespace

logger = logging.getLogger(__name__)

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
# What a tenant's pods may not reach (EGRESS_DENY_CIDRS): the private and shared address ranges, where
# a cluster's pods, Services and nodes live, and the link-local range of the clouds' metadata services.
DEFAULT_EGRESS_DENY = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16")
DEFAULT_EGRESS_DENY_V6 = ("fc00::/7", "fe80::/10")
DEFAULT_PROXY_POD_LABELS = (("app.kubernetes.io/name", "gpu-console"),)
DEFAULT_DNS_POD_LABELS = (("k8s-app", "kube-dns"),)
# The console's tiers, as the options name them (``InstanceSpec.interruptible`` says which).
TIER_ON_DEMAND, TIER_INTERRUPTIBLE = "on-demand", "interruptible"
TIERS = (TIER_ON_DEMAND, TIER_INTERRUPTIBLE)


@dataclass(frozen=True)
class KubeOptions:
    """The backend's OPTIONS, read once, with their defaults."""

    namespace: str = "default"
    region: str = ""
    gpu_label: str = "nvidia.com/gpu.product"
    gpu_models: tuple[tuple[str, str], ...] = tuple(DEFAULT_GPU_MODELS.items())
    images: tuple[tuple[str, str], ...] = ()
    console_registry_pulls: bool = False
    tenant_namespace_prefix: str = TENANT_NAMESPACE_PREFIX
    proxy_pod_labels: tuple[tuple[str, str], ...] = DEFAULT_PROXY_POD_LABELS
    dns_namespace: str = "kube-system"
    dns_pod_labels: tuple[tuple[str, str], ...] = DEFAULT_DNS_POD_LABELS
    egress_deny_cidrs: tuple[str, ...] = DEFAULT_EGRESS_DENY
    egress_deny_cidrs_v6: tuple[str, ...] = DEFAULT_EGRESS_DENY_V6
    tenant_quota: tuple[tuple[str, str], ...] = ()
    tenant_role: str = "gpu-console-tenant"
    service_account: str = "gpu-console"
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
    # Where NVIDIA's DCGM exporter runs (the GPU Operator's DaemonSet), read for the GPU charts
    # (``providers.kubernetes.dcgm``); an empty namespace turns GPU samples off.
    dcgm_namespace: str = "gpu-operator"
    dcgm_selector: str = "app=nvidia-dcgm-exporter"
    dcgm_port: int = 9400
    # A cluster's fabric: NCCL's environment and the RDMA resource (name, count per pod; "": none).
    nccl_env: tuple[tuple[str, str], ...] = ()
    rdma_resource: str = ""
    rdma_per_pod: int = 1
    # PriorityClass and Kueue WorkloadPriorityClass names by tier ("on-demand", "interruptible").
    priority_classes: tuple[tuple[str, str], ...] = ()
    kueue_priority_classes: tuple[tuple[str, str], ...] = ()

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
        nccl_env = tuple((str(k), str(v)) for k, v in (options.get("NCCL_ENV") or {}).items())
        bad = [name for name, _value in nccl_env if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)]
        if bad:
            raise PermanentBackendError(f"NCCL_ENV names must be environment variable names, not {', '.join(bad)}.")
        rdma = str(options.get("RDMA_RESOURCE", "") or "")
        if rdma and not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", rdma):
            raise PermanentBackendError(f"RDMA_RESOURCE must be an extended resource name (vendor/name), not {rdma!r}.")
        rdma_per_pod = int(options.get("RDMA_PER_POD", 1))
        if rdma and rdma_per_pod < 1:
            raise PermanentBackendError("RDMA_PER_POD must be at least 1.")
        tiers = {}
        for option in ("PRIORITY_CLASSES", "KUEUE_PRIORITY_CLASSES"):
            names = {str(k): str(v) for k, v in (options.get(option) or {}).items()}
            unknown = [tier for tier in names if tier not in TIERS]
            if unknown:
                raise PermanentBackendError(
                    f"{option} names the tiers on-demand and interruptible, not {', '.join(unknown)}."
                )
            tiers[option] = tuple(sorted(names.items()))
        if options.get("DEFAULT_IMAGE"):
            # Not fatal (the running machines must still be watched), but said: launches of an image
            # missing from IMAGES now fail instead of starting this one.
            logger.warning(
                "%s: DEFAULT_IMAGE is no longer read: an image the owner chose is never replaced. "
                "Name every image of this region in IMAGES.",
                alias,
            )
        deny_v4, deny_v6 = [], []
        for cidr in options.get("EGRESS_DENY_CIDRS") or (*DEFAULT_EGRESS_DENY, *DEFAULT_EGRESS_DENY_V6):
            try:
                network = ipaddress.ip_network(str(cidr))
            except ValueError as exc:
                raise PermanentBackendError(f"EGRESS_DENY_CIDRS: {cidr!r} is not a network.") from exc
            (deny_v4 if network.version == 4 else deny_v6).append(str(network))
        # The same IPv4 ranges through a NAT64 gateway (64:ff9b::/96 + the IPv4 address) and as IPv4-mapped
        # addresses: a pod of an IPv6 cluster must not reach them that way either.
        for cidr in deny_v4:
            network = ipaddress.ip_network(cidr)
            for prefix in ("64:ff9b::", "::ffff:0:0"):
                base = int(ipaddress.IPv6Address(prefix)) + int(network.network_address)
                deny_v6.append(str(ipaddress.IPv6Network((base, 96 + network.prefixlen))))
        return cls(
            namespace=namespace,
            region=options.get("REGION") or alias,
            gpu_label=options.get("GPU_LABEL", cls.gpu_label),
            gpu_models=tuple((options.get("GPU_MODELS") or DEFAULT_GPU_MODELS).items()),
            images=tuple((options.get("IMAGES") or {}).items()),
            console_registry_pulls=bool(options.get("CONSOLE_REGISTRY_PULLS", False)),
            tenant_namespace_prefix=str(options.get("TENANT_NAMESPACE_PREFIX", TENANT_NAMESPACE_PREFIX)),
            proxy_pod_labels=tuple(sorted((options.get("PROXY_POD_LABELS") or dict(DEFAULT_PROXY_POD_LABELS)).items())),
            dns_namespace=str(options.get("DNS_NAMESPACE", "kube-system")),
            dns_pod_labels=tuple(sorted((options.get("DNS_POD_LABELS") or dict(DEFAULT_DNS_POD_LABELS)).items())),
            egress_deny_cidrs=tuple(deny_v4),
            egress_deny_cidrs_v6=tuple(deny_v6),
            tenant_quota=tuple(sorted((str(k), str(v)) for k, v in (options.get("TENANT_QUOTA") or {}).items())),
            tenant_role=str(options.get("TENANT_ROLE", cls.tenant_role) or ""),
            service_account=str(options.get("SERVICE_ACCOUNT", cls.service_account) or ""),
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
            dcgm_namespace=options.get("DCGM_NAMESPACE", cls.dcgm_namespace),
            dcgm_selector=options.get("DCGM_SELECTOR", cls.dcgm_selector),
            dcgm_port=int(options.get("DCGM_PORT", cls.dcgm_port)),
            nccl_env=nccl_env,
            rdma_resource=rdma,
            rdma_per_pod=rdma_per_pod,
            priority_classes=tiers["PRIORITY_CLASSES"],
            kueue_priority_classes=tiers["KUEUE_PRIORITY_CLASSES"],
        )

    def priority_class_for(self, *, interruptible: bool) -> str:
        """The PriorityClass a pod of this tier carries; "" when none is configured."""
        return dict(self.priority_classes).get(TIER_INTERRUPTIBLE if interruptible else TIER_ON_DEMAND, "")

    def kueue_priority_class_for(self, *, interruptible: bool) -> str:
        """The Kueue WorkloadPriorityClass of this tier's Jobs; "" when none is configured."""
        return dict(self.kueue_priority_classes).get(TIER_INTERRUPTIBLE if interruptible else TIER_ON_DEMAND, "")

    def gpu_label_value(self, slug: str) -> str:
        value = dict(self.gpu_models).get(slug)
        if not value:
            raise PermanentBackendError(f"This cluster has no nodes for the GPU model {slug!r}.")
        return value

    def image_for(self, slug: str, *, image_ref: str = "") -> str:
        """The container image of the console's image ``slug``: where the cluster pulls the console's
        registry (``CONSOLE_REGISTRY_PULLS``), the launch's pinned reference ``image_ref``
        (``repository@sha256:…``, so a tag that moves later never changes a running pod), else what
        ``IMAGES`` maps. One this region can run neither way is refused with its name: the owner chose
        it, and a machine of another image would not be what they chose."""
        if self.console_registry_pulls and image_ref:
            return image_ref
        image = dict(self.images).get(slug)
        if not image:
            raise PermanentBackendError(f"The image {slug!r} is not available in this region.")
        return image

    def has_image(self, slug: str, *, image_ref: str = "") -> bool:
        return bool(dict(self.images).get(slug)) or bool(self.console_registry_pulls and image_ref)

    def tenant_namespace(self, owner_ref: str) -> str:
        """The namespace of ``owner_ref``'s machines (``names.tenant_namespace``)."""
        return tenant_namespace(owner_ref, prefix=self.tenant_namespace_prefix)
