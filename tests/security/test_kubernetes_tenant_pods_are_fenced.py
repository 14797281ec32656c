"""Kubernetes tenants do not share the console's network (issue 24): what a tenant's pod may reach, and
what may reach it, read off the objects the backend really makes.

Two tenants each launch a machine through the backend (against the fake API server); the test then
takes the NetworkPolicies and pods the backend made, puts them in a small model of a cluster (the
console's namespace with its proxy and its database, the cluster's DNS, a node, the cloud's metadata
service, the internet) and asks the policies, with the semantics Kubernetes documents for
NetworkPolicy, whether each connection is allowed:

- a pod selected by some policy of its namespace for a direction is isolated in that direction: only
  what a rule of such a policy allows passes; a pod no policy selects is not isolated;
- a connection needs both the sender's egress and the receiver's ingress to allow it;
- a peer with a ``podSelector`` alone means pods of the policy's own namespace; with a
  ``namespaceSelector`` alone, every pod of the namespaces it selects; with both, the pods it selects in
  those namespaces; an ``ipBlock``, the addresses in its CIDR less its exceptions (the model applies
  it to pods' addresses too, as Calico and most others do);
- a rule without ``ports`` allows every port; an empty ``to``/``from`` (or none) allows every peer.

The model is checked too: with no policy every connection passes, so a tenant left unfenced fails here.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

import pytest

from providers.base import InstanceSpec
from providers.kubernetes import KubernetesBackend, instance_name
from providers.kubernetes.tests.k8s_fake import IMAGES, fake_api_server

CONSOLE_NS = "gpu-console"
ALICE_KEY = "6f1c2a9b-03de-4f00-9000-00000000a11c"
BOB_KEY = "7a2d3b0c-14ef-4f00-9000-000000000b0b"
ALICE_NS, BOB_NS = "gpuc-user-1", "gpuc-user-2"


@dataclass(frozen=True)
class Endpoint:
    """A pod (with its namespace and labels) or an address outside every pod (namespace "")."""

    ip: str
    namespace: str = ""
    labels: tuple[tuple[str, str], ...] = ()
    name: str = ""

    @property
    def is_pod(self) -> bool:
        return bool(self.namespace)


@dataclass
class Cluster:
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    policies: list[dict] = field(default_factory=list)

    def allowed(self, src: Endpoint, dst: Endpoint, port: int, protocol: str = "TCP") -> bool:
        return self._direction(src, dst, port, protocol, "Egress") and self._direction(
            dst, src, port, protocol, "Ingress"
        )

    def _direction(self, pod: Endpoint, peer: Endpoint, port: int, protocol: str, kind: str) -> bool:
        """May ``pod`` send to (Egress) or receive from (Ingress) ``peer`` on ``port``?"""
        if not pod.is_pod:
            return True  # outside the cluster's pods: no policy applies to it
        selecting = [
            p
            for p in self.policies
            if p["metadata"]["namespace"] == pod.namespace
            and kind in _policy_types(p)
            and _selects(p["spec"]["podSelector"], dict(pod.labels))
        ]
        if not selecting:
            return True
        key, peers_key = ("egress", "to") if kind == "Egress" else ("ingress", "from")
        for policy in selecting:
            for rule in policy["spec"].get(key) or []:
                peers = rule.get(peers_key) or []
                peer_ok = not peers or any(self._peer_matches(p, peer, policy["metadata"]["namespace"]) for p in peers)
                ports = rule.get("ports") or []
                port_ok = not ports or any(
                    p.get("protocol", "TCP") == protocol and p.get("port") in (None, port) for p in ports
                )
                if peer_ok and port_ok:
                    return True
        return False

    def _peer_matches(self, peer: dict, endpoint: Endpoint, policy_namespace: str) -> bool:
        if "ipBlock" in peer:
            address = ipaddress.ip_address(endpoint.ip)
            block = peer["ipBlock"]
            network = ipaddress.ip_network(block["cidr"])
            if address.version != network.version or address not in network:
                return False
            return not any(
                address in ipaddress.ip_network(e)
                for e in block.get("except") or []
                if ipaddress.ip_network(e).version == address.version
            )
        if not endpoint.is_pod:
            return False
        if "namespaceSelector" in peer:
            if not _selects(peer["namespaceSelector"], self.namespace_labels.get(endpoint.namespace, {})):
                return False
        elif endpoint.namespace != policy_namespace:
            return False
        return _selects(peer.get("podSelector", {}), dict(endpoint.labels))


def _policy_types(policy: dict) -> list[str]:
    spec = policy["spec"]
    return spec.get("policyTypes") or (["Ingress"] + (["Egress"] if "egress" in spec else []))


def _selects(selector: dict, labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels", "matchExpressions"}, selector
    assert not selector.get("matchExpressions"), "the model reads matchLabels only"
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def _spec(owner_ref: str) -> InstanceSpec:
    return InstanceSpec(
        node="gpu-a", gpu_model="h200", gpu_count=1, image="pytorch-2.5-cu124", disk_gb=20, owner_ref=owner_ref
    )


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """What the backend made for two tenants: their namespaces' policies and their machines' pods."""
    with fake_api_server(tmp_path_factory.mktemp("k8s"), namespace=CONSOLE_NS) as api:
        api.cluster.add_node("gpu-a", gpus=8)
        backend = KubernetesBackend(alias="k8s", options={"KUBECONFIG": str(api.kubeconfig), "IMAGES": IMAGES})
        backend.create(key=ALICE_KEY, spec=_spec("user-1"))
        backend.create(key=BOB_KEY, spec=_spec("user-2"))
        policies = api.cluster.list("networkpolicies")
        namespaces = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in api.cluster.list("namespaces")}
        pods = {p["metadata"]["name"]: p for p in api.cluster.list("pods")}
    return policies, namespaces, pods


def _pod(pod: dict, ip: str) -> Endpoint:
    meta = pod["metadata"]
    return Endpoint(ip=ip, namespace=meta["namespace"], labels=tuple(sorted(meta["labels"].items())), name=meta["name"])


@pytest.fixture(scope="module")
def world(made):
    policies, namespaces, pods = made
    # Kubernetes labels every namespace with its own name; the model does what the API server does.
    labels = {name: {**found, "kubernetes.io/metadata.name": name} for name, found in namespaces.items()}
    labels.setdefault(CONSOLE_NS, {"kubernetes.io/metadata.name": CONSOLE_NS})
    labels.setdefault("kube-system", {"kubernetes.io/metadata.name": "kube-system"})
    cluster = Cluster(namespace_labels=labels, policies=policies)
    alice = _pod(pods[f"{instance_name(ALICE_KEY)}-0"], "10.244.1.7")
    bob = _pod(pods[f"{instance_name(BOB_KEY)}-0"], "10.244.2.9")
    alice_rank = Endpoint(ip="10.244.3.4", namespace=alice.namespace, labels=(("console.gpu/cluster", "c"),))
    return {
        "cluster": cluster,
        "alice": alice,
        "alice's other pod": alice_rank,
        "bob": bob,
        "console proxy": Endpoint(
            "10.244.0.5", CONSOLE_NS, (("app.kubernetes.io/name", "gpu-console"), ("component", "web"))
        ),
        "console database": Endpoint("10.244.0.6", CONSOLE_NS, (("app.kubernetes.io/name", "postgres"),)),
        "dns": Endpoint("10.96.0.10", "kube-system", (("k8s-app", "kube-dns"),)),
        "node's kubelet": Endpoint("192.168.1.10"),
        "api server": Endpoint("172.20.0.1"),
        "metadata service": Endpoint("169.254.169.254"),
        "internet": Endpoint("93.184.216.34"),
        "internet v6": Endpoint("2606:2800:220:1:248:1893:25c8:1946"),
        "private v4 through nat64": Endpoint("64:ff9b::a00:1"),
    }


def test_both_tenants_namespaces_are_their_own_and_fenced_in_both_directions(made):
    policies, _namespaces, pods = made
    assert {p["metadata"]["namespace"] for p in pods.values()} == {ALICE_NS, BOB_NS}
    for namespace in (ALICE_NS, BOB_NS):
        [fence] = [p for p in policies if p["metadata"]["namespace"] == namespace]
        # Every pod of the namespace, whatever its labels, for both directions.
        assert fence["spec"]["podSelector"] == {} and set(fence["spec"]["policyTypes"]) == {"Ingress", "Egress"}


@pytest.mark.parametrize(
    ("src", "dst", "port", "protocol"),
    [
        ("alice", "console proxy", 8000, "TCP"),
        ("alice", "console database", 5432, "TCP"),
        ("alice", "bob", 8888, "TCP"),
        ("alice", "bob", 2222, "TCP"),
        ("bob", "alice", 8888, "TCP"),
        ("alice", "dns", 9153, "TCP"),  # the DNS pod, but not its DNS port
        ("alice", "node's kubelet", 10250, "TCP"),
        ("alice", "api server", 443, "TCP"),
        ("alice", "metadata service", 80, "TCP"),
        ("alice", "private v4 through nat64", 5432, "TCP"),
        ("console database", "alice", 8888, "TCP"),  # the console's namespace, but not its proxy
        ("bob", "alice", 2222, "TCP"),
        ("internet", "alice", 2222, "TCP"),  # no way in from outside but through the console
    ],
    ids=lambda v: str(v),
)
def test_a_tenants_pod_is_denied(world, src, dst, port, protocol):
    assert not world["cluster"].allowed(world[src], world[dst], port, protocol)


@pytest.mark.parametrize(
    ("src", "dst", "port", "protocol"),
    [
        ("alice", "dns", 53, "UDP"),
        ("alice", "dns", 53, "TCP"),
        ("alice", "internet", 443, "TCP"),
        ("alice", "internet v6", 443, "TCP"),
        ("console proxy", "alice", 8888, "TCP"),  # JupyterLab through the console's proxy
        ("console proxy", "alice", 2222, "TCP"),  # sshd through the console's SSH gateway
        ("alice", "alice's other pod", 29500, "TCP"),  # a cluster's ranks talk to each other
        ("alice's other pod", "alice", 29500, "TCP"),
        ("bob", "internet", 443, "TCP"),
    ],
    ids=lambda v: str(v),
)
def test_a_tenants_pod_is_allowed(world, src, dst, port, protocol):
    assert world["cluster"].allowed(world[src], world[dst], port, protocol)


def test_the_model_lets_everything_through_without_a_policy(world):
    """The check can fail: unfenced (as pods in the console's namespace were), every connection passes."""
    open_cluster = Cluster(namespace_labels=world["cluster"].namespace_labels, policies=[])
    assert open_cluster.allowed(world["alice"], world["console database"], 5432)
    assert open_cluster.allowed(world["alice"], world["bob"], 8888)
    assert open_cluster.allowed(world["alice"], world["metadata service"], 80)
