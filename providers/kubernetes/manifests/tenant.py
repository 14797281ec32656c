"""A tenant's namespace and its fence: the Namespace under the restricted Pod Security Standard, the
console's RoleBinding, a default-deny NetworkPolicy and, with ``TENANT_QUOTA``, its ResourceQuota.
Pure, as every builder here.
"""

from __future__ import annotations

from providers.kubernetes.manifests.instance import NAMESPACE_NAME_LABEL
from providers.kubernetes.names import (
    LABEL_MANAGED,
    LABEL_TENANT,
    MANAGED_BY,
)
from providers.kubernetes.options import KubeOptions

FENCE_POLICY = "tenant-fence"


DNS_PORT = 53


def _selector(labels: tuple[tuple[str, str], ...]) -> dict:
    return {"matchLabels": dict(labels)}


def tenant_manifests(opts: KubeOptions, *, owner_ref: str) -> list[dict]:
    """A tenant's namespace, in creation order: the Namespace, the console's RoleBinding there (with
    ``TENANT_ROLE``: the console's rights in the namespace, and nowhere else), its NetworkPolicy, and,
    with ``TENANT_QUOTA``, its ResourceQuota.

    The Namespace enforces the ``restricted`` Pod Security Standard, which the tenant's pods meet (the
    image's user, no privilege, no capability, RuntimeDefault seccomp): the API server refuses any pod
    there that does not, whoever makes it.

    The NetworkPolicy selects every pod of the namespace, for both directions, so whatever it does not
    allow is denied (a selected pod's traffic is allowed only by a policy that selects it):

    - **ingress** only from the console's own pods (``PROXY_POD_LABELS`` in the console's namespace:
      its proxy and SSH gateway) and from the tenant's own pods (a cluster's ranks). Denied: every other
      namespace, other tenants included, and anything outside the cluster.
    - **egress** to the cluster's DNS (``DNS_POD_LABELS`` in ``DNS_NAMESPACE``, port 53), to the tenant's
      own pods, and to any address outside ``EGRESS_DENY_CIDRS`` (the internet). Denied: the private
      and shared ranges where the cluster's pods, Services and nodes live (so the console's namespace,
      other tenants, the API server on a private address and the nodes' kubelets), and the link-local
      range of the clouds' metadata services. Kubernetes applies the policy after a Service's address
      is translated to its pods', so a Service is reached exactly when its pods are.
    """
    namespace = opts.tenant_namespace(owner_ref)
    labels = {LABEL_MANAGED: MANAGED_BY, LABEL_TENANT: owner_ref}
    console_pods = {
        "namespaceSelector": _selector(((NAMESPACE_NAME_LABEL, opts.namespace),)),
        "podSelector": _selector(opts.proxy_pod_labels),
    }
    own_pods = {"podSelector": {}}  # a peer with only a podSelector: pods of this same namespace
    internet = []
    if opts.egress_deny_cidrs:
        internet.append({"ipBlock": {"cidr": "0.0.0.0/0", "except": list(opts.egress_deny_cidrs)}})
    if opts.egress_deny_cidrs_v6:
        internet.append({"ipBlock": {"cidr": "::/0", "except": list(opts.egress_deny_cidrs_v6)}})
    made: list[dict] = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": namespace,
                "labels": {
                    **labels,
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/enforce-version": "latest",
                },
            },
        },
    ]
    if opts.tenant_role and opts.service_account:
        made.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "gpu-console", "namespace": namespace, "labels": labels},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": opts.tenant_role},
                "subjects": [{"kind": "ServiceAccount", "name": opts.service_account, "namespace": opts.namespace}],
            }
        )
    made.append(
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": FENCE_POLICY, "namespace": namespace, "labels": labels},
            "spec": {
                "podSelector": {},
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [{"from": [console_pods, own_pods]}],
                "egress": [
                    {
                        "to": [
                            {
                                "namespaceSelector": _selector(((NAMESPACE_NAME_LABEL, opts.dns_namespace),)),
                                "podSelector": _selector(opts.dns_pod_labels),
                            }
                        ],
                        "ports": [
                            {"protocol": "UDP", "port": DNS_PORT},
                            {"protocol": "TCP", "port": DNS_PORT},
                        ],
                    },
                    {"to": [own_pods]},
                    *([{"to": internet}] if internet else []),
                ],
            },
        }
    )
    if opts.tenant_quota:
        made.append(
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": "tenant-quota", "namespace": namespace, "labels": labels},
                "spec": {"hard": dict(opts.tenant_quota)},
            }
        )
    return made
