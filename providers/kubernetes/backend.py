"""``KubernetesBackend``: the ``ProvisioningBackend`` calls for single machines (nodes, create, start,
stop, restart, destroy, poll, the machines list, GPU samples, entry points), on ``KubeClient`` (the API
client and namespaces), ``KubeVolumes`` and ``KubeClusters``. What it sends is built by ``manifests``;
what it reads is judged by ``observation``; the objects it makes are described in the package's
docstring.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from kubernetes import watch
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from core.user_content import ProxyTarget
from providers.base import (
    BackendError,
    ClustersCapability,
    EntryPoints,
    EntryPointsCapability,
    GpuMetricsCapability,
    GpuSample,
    InstanceSpec,
    MachineInfo,
    NodeInfo,
    Observation,
    Observed,
    PermanentBackendError,
    ProvisioningBackend,
    SnapshotsCapability,
    SshTarget,
    TransientBackendError,
    VolumesCapability,
)
from providers.kubernetes.client import STATE_VERSION, _extra, _NotFound, _secret_tokens, _with_node
from providers.kubernetes.clusters import KubeClusters
from providers.kubernetes.dcgm import samples_by_pod
from providers.kubernetes.manifests import (
    node_affinity,
    pod_template,
    statefulset_manifest,
    user_secret_manifest,
)
from providers.kubernetes.names import (
    ANNOTATION_APP_BASE,
    ANNOTATION_GPUS,
    ANNOTATION_NODE,
    ANNOTATION_WEBUI_BASE,
    APP,
    CODE,
    JOB_INDEX_LABEL,
    LAB,
    LABEL_CLUSTER,
    LABEL_INSTANCE,
    SSH,
    WEBUI,
    instance_name,
    volume_name,
)
from providers.kubernetes.observation import (
    PodEvent,
    allocatable_gpus,
    cluster_job_cards,
    node_healthy,
    observe_cluster_job,
    observe_machine,
    observe_pod,
    pod_ready,
)
from providers.kubernetes.snapshots import KubeSnapshots
from providers.kubernetes.volumes import KubeVolumes

logger = logging.getLogger(__name__)

CODE_SERVER_COOKIE = "code-server-session"


class KubernetesBackend(
    KubeClusters,
    KubeVolumes,
    KubeSnapshots,
    ClustersCapability,
    VolumesCapability,
    EntryPointsCapability,
    GpuMetricsCapability,
    SnapshotsCapability,
    ProvisioningBackend,
):
    """A namespace of a Kubernetes cluster: one machine is a StatefulSet of one pod with its disk.

    A multi-node instance (``spec.nodes`` > 1) is a head and workers (``cluster_create``; see the
    package's docstring): the head is a single machine's StatefulSet, disk, Service and Secret, with
    the same entry points (JupyterLab, VS Code, SSH, the app), and the workers an Indexed Job of
    ``nodes - 1`` pods behind a headless Service, running the app's command (or ``CLUSTER_COMMAND``,
    ``sleep infinity`` by default, to hold the cards for a user who launches from the head). Stopping
    a cluster deletes the Job and scales the head to zero (the cards go back; the disk, the Secret
    and the Services stay); starting it makes the Job again and scales the head back to one.
    """

    def has_image(self, slug: str, *, image_ref: str = "") -> bool:
        """Whether ``IMAGES`` maps ``slug``, or the cluster pulls the console's registry and the image is
        pinned there (``CONSOLE_REGISTRY_PULLS``): read from the options, without connecting."""
        return bool((self.options.get("IMAGES") or {}).get(slug)) or bool(
            image_ref and self.options.get("CONSOLE_REGISTRY_PULLS")
        )

    # --- nodes ------------------------------------------------------------------------------------------

    def nodes(self) -> list[NodeInfo]:
        """Nodes with the GPU label whose value maps to a console GPU model; cards = allocatable GPUs.

        Healthy: the kubelet reports Ready and nobody cordoned it. A node whose device plugin has not
        registered yet has 0 allocatable cards (the console places nothing there).
        """
        opts = self.opts
        slugs = {value: slug for slug, value in opts.gpu_models}
        found = self._call(self.core.list_node, label_selector=opts.gpu_label)
        infos = []
        for node in found.get("items") or []:
            meta = node.get("metadata") or {}
            product = (meta.get("labels") or {}).get(opts.gpu_label, "")
            slug = slugs.get(product)
            if slug is None:
                logger.info("node %s: GPU %r is not in GPU_MODELS; ignored", meta.get("name"), product)
                continue
            infos.append(
                NodeInfo(
                    name=meta["name"],
                    region=opts.region,
                    gpu_model=slug,
                    cards=allocatable_gpus(node),
                    healthy=node_healthy(node),
                )
            )
        return sorted(infos, key=lambda n: n.name)

    # --- instances --------------------------------------------------------------------------------------

    def create(self, *, key: str, spec: InstanceSpec) -> dict:
        """Secret, disk, Service, then the StatefulSet; each that exists is kept (a retry finds them).

        The Secret first: a retry reads the tokens it holds instead of minting new ones. A cluster
        (``spec.nodes`` > 1) is its head and workers instead (``cluster_create``).
        """
        self.opts.image_for(
            spec.image, image_ref=spec.image_ref
        )  # an image this region lacks is refused before anything is made
        if spec.nodes > 1:
            return self._cluster_start(key, spec)
        self._volumes_check(spec)
        tokens = self._ensure_workspace(key, spec)
        self._user_secrets_apply(key, spec, self._ns(key, spec=spec))
        sts = self._create(
            self.apps.create_namespaced_stateful_set,
            self.apps.read_namespaced_stateful_set,
            statefulset_manifest(self.opts, alias=self.alias, key=key, spec=spec),
            key=key,
        )
        node = ((sts.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_NODE, spec.node)
        return self._state(key, node=node, gpus=spec.gpu_count, tokens=tokens, namespace=self._ns(key, spec=spec))

    def _state(self, key: str, *, node: str, gpus: int, tokens: dict, namespace: str) -> dict:
        ns = namespace
        return {
            "v": STATE_VERSION,
            "namespace": ns,
            "name": instance_name(key),
            "node": node,
            "gpus": gpus,
            "secrets": {LAB: tokens[LAB], CODE: tokens[CODE], APP: tokens.get(APP, "")},
        }

    def _volumes_check(self, spec: InstanceSpec) -> None:
        ns = self.opts.tenant_namespace(spec.owner_ref)
        for mount in spec.volumes:
            try:
                self._call(self.core.read_namespaced_persistent_volume_claim, volume_name(mount.key), ns)
            except _NotFound as exc:
                raise PermanentBackendError(f"The volume {mount.key} does not exist in this region.") from exc

    # --- GPU samples: the DCGM exporter of each node, through the API server (providers.kubernetes.dcgm) ---

    def gpu_samples(self, *, machines: Sequence[tuple[str, dict]], at: datetime) -> dict[str, list[GpuSample]]:
        """One list of this alias's pods, one list of the exporters, one scrape per node that runs a
        machine asked about. A cluster's cards come head first, then its workers by rank. A node whose
        exporter is missing or does not answer leaves its machines out (a gap, not idleness)."""
        if not self.opts.dcgm_namespace:
            return {}
        wanted = {key for key, _state in machines}
        # Every tenant's namespace at once: the pods carry the alias's labels wherever they are.
        found = self._call(self.core.list_pod_for_all_namespaces, label_selector=self._selector()) or {}
        owners: dict[tuple[str, str], tuple[str, int]] = {}  # (namespace, pod name) -> (instance key, rank)
        nodes: set[str] = set()
        for pod in found.get("items") or []:
            labels = pod["metadata"].get("labels") or {}
            key = labels.get(LABEL_INSTANCE) or labels.get(LABEL_CLUSTER)
            node = (pod.get("spec") or {}).get("nodeName")
            if key not in wanted or not node or (pod.get("status") or {}).get("phase") != "Running":
                continue
            index = labels.get(JOB_INDEX_LABEL, "0")
            rank = 0 if labels.get(LABEL_INSTANCE) else 1 + (int(index) if index.isdigit() else 0)
            owners[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = (key, rank)
            nodes.add(node)
        exporters = (
            self._call(self.core.list_namespaced_pod, self.opts.dcgm_namespace, label_selector=self.opts.dcgm_selector)
            or {}
        )
        exporter_on = {
            (p.get("spec") or {}).get("nodeName"): p["metadata"]["name"]
            for p in exporters.get("items") or []
            if (p.get("status") or {}).get("phase") == "Running"
        }
        by_pod: dict[tuple[str, str], list[GpuSample]] = {}
        namespaces = {namespace for namespace, _pod in owners}
        for node in sorted(nodes):
            if node not in exporter_on:
                continue
            try:
                text = self._call(
                    self.core.connect_get_namespaced_pod_proxy_with_path,
                    f"{exporter_on[node]}:{self.opts.dcgm_port}",
                    self.opts.dcgm_namespace,
                    "metrics",
                    _text=True,
                )
            except (BackendError, _NotFound):
                logger.warning("the DCGM exporter on %s did not answer", node, exc_info=True)
                continue
            for namespace in namespaces:
                by_pod.update(
                    ((namespace, pod), cards) for pod, cards in samples_by_pod(text, namespace=namespace).items()
                )
        samples: dict[str, list[GpuSample]] = {}
        for pod_name, (key, _rank) in sorted(owners.items(), key=lambda item: (item[1][1], item[0])):
            if pod_name not in by_pod:
                continue
            cards = samples.setdefault(key, [])
            first = len(cards)  # a worker's cards follow the head's
            cards.extend(replace(sample, card=first + i) for i, sample in enumerate(by_pod[pod_name]))
        return samples

    # --- a machine's life (a cluster's key goes to KubeClusters' _cluster_* methods) -----------------

    def start(self, *, key: str, state: dict, node: str, spec: InstanceSpec | None = None) -> dict:
        """Scale to one on ``node``; with ``spec``, first replace the pod template (app, volumes, image).

        On a running machine whose container keeps crashing (the console's repair), the pod is
        deleted: its replacement starts at once instead of after the kubelet's growing back-off.
        A cluster's Job is made again (from ``spec``: the console always passes it).
        """
        if state.get("cluster"):
            if spec is None:
                raise PermanentBackendError("A cluster starts only with its spec.")
            return {**state, **self._cluster_start(key, spec)}
        ns = self._ns(key, state, spec)
        self._forget(key)
        sts = self._read_sts(key, ns)
        name = instance_name(key)
        ops: list[dict] = []
        if spec is not None:
            spec = _with_node(spec, node)
            self._volumes_check(spec)
            self._user_secrets_apply(key, spec, ns)
            ops.append({"op": "replace", "path": "/spec/template", "value": self._template(key, spec)})
            self._replace_service_ports(key, spec, ns)
        elif node:
            template = ((sts.get("spec") or {}).get("template") or {}).get("spec") or {}
            if self.opts.pin_to_node:
                op = "replace" if "affinity" in template else "add"
                ops.append({"op": op, "path": "/spec/template/spec/affinity", "value": node_affinity(node)})
        annotations = (sts.get("metadata") or {}).get("annotations") or {}
        ops.append(
            {
                "op": "replace" if annotations else "add",
                "path": "/metadata/annotations",
                "value": {**annotations, ANNOTATION_NODE: node or annotations.get(ANNOTATION_NODE, "")},
            }
        )
        ops.append({"op": "replace", "path": "/spec/replicas", "value": 1})
        self._call(self.apps.patch_namespaced_stateful_set, name, ns, ops)
        for pod in self._pods(key, ns):
            if observe_pod(pod).state == Observed.DEGRADED:
                self._delete(self.core.delete_namespaced_pod, pod["metadata"]["name"], namespace=ns)
        gpus = int(annotations.get(ANNOTATION_GPUS) or state.get("gpus") or 0)
        tokens = self._tokens(key, state)
        return {**self._state(key, node=node, gpus=gpus, tokens=tokens, namespace=ns), **_extra(state)}

    def _template(self, key: str, spec: InstanceSpec) -> dict:
        return pod_template(self.opts, alias=self.alias, key=key, spec=spec)

    def _user_secrets_apply(self, key: str, spec: InstanceSpec | None, ns: str) -> None:
        """The owner's secrets for this boot as their own Secret (``user_secret_manifest``), made again
        whole so a secret no longer chosen is gone; none (or a stop, ``spec`` None): no Secret at all."""
        self._delete(self.core.delete_namespaced_secret, f"{instance_name(key)}-user-secrets", namespace=ns)
        if spec is not None and spec.secrets:
            self._create(
                self.core.create_namespaced_secret,
                self.core.read_namespaced_secret,
                user_secret_manifest(self.opts, alias=self.alias, key=key, spec=spec),
                key=key,
            )

    def stop(self, *, key: str, state: dict) -> dict:
        """Scale to zero: the pod goes (and its GPUs with it); disk, Secret and Service stay.

        A cluster's Job is deleted instead (see the class's docstring)."""
        if state.get("cluster"):
            return self._cluster_stop(key, state)
        ns = self._ns(key, state)
        self._forget(key)
        try:
            self._call(
                self.apps.patch_namespaced_stateful_set,
                instance_name(key),
                ns,
                {"spec": {"replicas": 0}},
                _content_type="application/merge-patch+json",
            )
        except _NotFound as exc:
            raise PermanentBackendError("The machine no longer exists.") from exc
        self._user_secrets_apply(key, None, ns)  # the next start brings them again
        return dict(state)

    def restart(self, *, key: str, state: dict, spec: InstanceSpec | None = None) -> dict:
        """Delete the pod; the StatefulSet makes a new one on the same node (with ``spec``'s template).

        A cluster is stopped and started: its Job is made again once the old one is gone (until then
        the start is a transient error the task retries)."""
        if state.get("cluster"):
            if spec is None:
                raise PermanentBackendError("A cluster restarts only with its spec.")
            stopped = self._cluster_stop(key, state)
            return {**stopped, **self._cluster_start(key, spec)}
        ns = self._ns(key, state, spec)
        self._forget(key)
        sts = self._read_sts(key, ns)
        if not (sts.get("spec") or {}).get("replicas"):
            raise PermanentBackendError("Only a running machine can be restarted.")
        if spec is not None:
            node = ((sts.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_NODE, spec.node)
            spec = _with_node(spec, node)
            self._volumes_check(spec)
            self._user_secrets_apply(key, spec, ns)
            self._call(
                self.apps.patch_namespaced_stateful_set,
                instance_name(key),
                ns,
                [{"op": "replace", "path": "/spec/template", "value": self._template(key, spec)}],
            )
            self._replace_service_ports(key, spec, ns)
        self._delete(self.core.delete_namespaced_pod, f"{instance_name(key)}-0", namespace=ns)
        return dict(state)

    def destroy(self, *, key: str, state: dict) -> None:
        """Delete the StatefulSet (its pod with it), the Service, the Secret and the disk; gone is done.

        A cluster's Job and Service go instead; with no state (the reconciler's leaked machine), both."""
        if state.get("cluster") or not state:
            self.cluster_destroy(key=key, state=state)
            if state:
                return
        ns = self._ns(key, state)
        self._forget(key)
        name = instance_name(key)
        self._delete(self.apps.delete_namespaced_stateful_set, name, propagation_policy="Background", namespace=ns)
        self._delete(self.core.delete_namespaced_service, name, namespace=ns)
        self._delete(self.core.delete_namespaced_secret, f"{name}-secrets", namespace=ns)
        self._delete(self.core.delete_namespaced_secret, f"{name}-user-secrets", namespace=ns)
        self._delete(self.core.delete_namespaced_persistent_volume_claim, f"{name}-home", namespace=ns)
        if self.supports_snapshots:
            self.snapshots_destroy(key=key, ns=ns)  # its snapshots go with it

    def poll(self, *, key: str, state: dict) -> Observation:
        if state.get("cluster"):
            try:
                return self._cluster_observe(key, state)
            except (TransientBackendError, PermanentBackendError) as exc:
                return Observation(Observed.UNKNOWN, detail=str(exc)[:200])
        try:
            return self._poll(key, self._ns(key, state))
        except (TransientBackendError, PermanentBackendError) as exc:
            # Unreachable, or refusing the console's credentials or configuration: it cannot tell,
            # and a machine it cannot see is not thereby gone.
            return Observation(Observed.UNKNOWN, detail=str(exc)[:200])

    def _poll(self, key: str, ns: str) -> Observation:
        try:
            sts = self._call(self.apps.read_namespaced_stateful_set, instance_name(key), ns)
        except _NotFound:
            return Observation(Observed.GONE)
        pods = self._pods(key, ns)
        return self._observe(sts, pods[0] if pods else None, self._read_node)

    def _read_node(self, name: str) -> dict | None:
        try:
            return self._call(self.core.read_node, name)
        except _NotFound:
            return None

    def _observe(self, sts: dict, pod: dict | None, node_of: Callable[[str], dict | None]) -> Observation:
        return observe_machine(sts, pod, node_of, pin_to_node=self.opts.pin_to_node)

    def machines(self) -> list[MachineInfo]:
        """Every tenant's machines: one list of each kind across namespaces, by this alias's labels."""
        sets = self._call(self.apps.list_stateful_set_for_all_namespaces, label_selector=self._selector())
        pods = self._call(self.core.list_pod_for_all_namespaces, label_selector=self._selector(LABEL_INSTANCE))
        nodes = {n["metadata"]["name"]: n for n in (self._call(self.core.list_node) or {}).get("items") or []}
        by_key: dict[str, dict] = {}
        for pod in pods.get("items") or []:
            by_key.setdefault(((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_INSTANCE, ""), pod)
        machines = []
        heads: dict[str, dict] = {}
        for sts in sets.get("items") or []:
            meta = sts.get("metadata") or {}
            key = (meta.get("labels") or {}).get(LABEL_INSTANCE)
            if not key:
                continue
            self._namespaces[key] = meta.get("namespace") or self.namespace
            if LABEL_CLUSTER in (meta.get("labels") or {}):
                heads[key] = sts  # a cluster's head: one machine with its workers (below)
                continue
            pod = by_key.get(key)
            annotations = meta.get("annotations") or {}
            observed = self._observe(sts, pod, nodes.get).state
            machines.append(
                MachineInfo(
                    key=key,
                    node=((pod or {}).get("spec") or {}).get("nodeName") or annotations.get(ANNOTATION_NODE, ""),
                    cards=int(annotations.get(ANNOTATION_GPUS) or 0),
                    observed=observed,
                    extra={"name": meta.get("name"), "namespace": meta.get("namespace")},
                )
            )
        # Clusters (their workers' Jobs and heads): running once every pod is ready, as ``cluster_poll`` says.
        jobs = self._call(self.batch.list_job_for_all_namespaces, label_selector=self._selector(LABEL_CLUSTER))
        for job in jobs.get("items") or []:
            key = ((job.get("metadata") or {}).get("labels") or {}).get(LABEL_CLUSTER)
            if not key:
                continue
            head = heads.pop(key, None)
            head_seen = self._observe(head, by_key.get(key), nodes.get).state if head else None
            machines.append(
                MachineInfo(
                    key=key,
                    node="",
                    cards=cluster_job_cards(job),
                    observed=observe_cluster_job(job, head=head_seen),
                    extra={
                        "name": (job.get("metadata") or {}).get("name"),
                        "namespace": (job.get("metadata") or {}).get("namespace"),
                        "cluster": True,
                    },
                )
            )
        # A head without its Job: a stopped cluster (STOPPED once its pod is gone), or one being made.
        for key, head in heads.items():
            meta = head.get("metadata") or {}
            machines.append(
                MachineInfo(
                    key=key,
                    node="",
                    cards=0,
                    # Its Job lost while the head runs: not a whole cluster (the sync's poll says why).
                    observed=Observed.STOPPED
                    if self._observe(head, by_key.get(key), nodes.get).state == Observed.STOPPED
                    else Observed.GONE,
                    extra={"name": meta.get("name"), "namespace": meta.get("namespace"), "cluster": True},
                )
            )
        return machines

    def watch_pods(self, *, timeout_s: int = 60, resource_version: str | None = None) -> Iterator[PodEvent]:
        """Yield each change to this backend's instance pods until ``timeout_s`` passes.

        For a reconciler that reacts within a second instead of polling: on each event, sync the
        instance ``event.key``. Without ``resource_version`` the first events are the pods that
        exist now (ADDED), as the API server sends them; pass the last event's version to resume.
        """
        stream = watch.Watch()
        kwargs: dict[str, Any] = {
            "label_selector": self._selector(LABEL_INSTANCE),
            "timeout_seconds": int(timeout_s),
            "_request_timeout": (self.opts.request_timeout_s, timeout_s + self.opts.request_timeout_s),
            "deserialize": False,
        }
        if resource_version:
            kwargs["resource_version"] = resource_version
        try:
            # Every tenant's namespace: one watch across them, by this alias's labels.
            for event in stream.stream(self.core.list_pod_for_all_namespaces, **kwargs):
                pod = event["object"]
                meta = pod.get("metadata") or {}
                yield PodEvent(
                    type=event["type"],
                    key=(meta.get("labels") or {}).get(LABEL_INSTANCE, ""),
                    pod=meta.get("name", ""),
                    phase=(pod.get("status") or {}).get("phase", ""),
                    ready=pod_ready(pod),
                    observation=observe_pod(None if event["type"] == "DELETED" else pod),
                    resource_version=meta.get("resourceVersion", ""),
                )
        except ApiException as exc:
            raise TransientBackendError(f"The pod watch ended: {exc.status} {exc.reason}") from exc
        except (HTTPError, OSError) as exc:
            raise TransientBackendError(f"The pod watch ended: {exc.__class__.__name__}") from exc
        finally:
            stream.stop()

    # --- entry points and the proxy ----------------------------------------------------------------------

    def entry_points(self, *, key: str, state: dict) -> EntryPoints:
        # A cluster's head is reached as a single machine is: the instance's Service selects only it.
        web = tuple(s for s in (LAB, CODE) if s in self.opts.services)
        ssh_port = None
        service = {}
        with contextlib.suppress(_NotFound, TransientBackendError, PermanentBackendError):
            service = self._call(self.core.read_namespaced_service, instance_name(key), self._ns(key, state))
        named = {port.get("name"): port for port in (service.get("spec") or {}).get("ports") or []}
        # A deployment's app (and its WebUI) are served wherever the Service has their ports.
        web += tuple(s for s in (APP, WEBUI) if s in named)
        if SSH in self.opts.services and self.opts.service_type in ("NodePort", "LoadBalancer") and SSH in named:
            # A ClusterIP is unreachable from the user's laptop; only an exposed Service has an SSH port.
            port = named[SSH]
            ssh_port = port.get("nodePort") if self.opts.service_type == "NodePort" else port.get("port")
        return EntryPoints(web=web, ssh_port=ssh_port, ssh_user=self.opts.ssh_user if ssh_port else "")

    def ssh_target(self, *, key: str) -> SshTarget | None:
        """The pod's sshd behind its Service, where the console reaches Services (``PROXY_HOST``): the SSH
        gateway needs no NodePort, so a ClusterIP instance is reachable over SSH through it too."""
        if SSH not in self.opts.services:
            return None
        name = instance_name(key)
        ns = self._ns(key)
        try:
            svc = self._call(self.core.read_namespaced_service, name, ns)
        except _NotFound:
            return None
        port = next((p for p in (svc.get("spec") or {}).get("ports") or [] if p.get("name") == SSH), None)
        number = (port or {}).get("nodePort") if self.opts.service_type == "NodePort" else (port or {}).get("port")
        if not number:
            return None
        host = self.opts.proxy_host.format(service=name, namespace=ns, key=key)
        return SshTarget(host=host, port=int(number), user=self.opts.ssh_user)

    def proxy_target(self, *, key: str, service: str):
        """The Service's cluster DNS name (``PROXY_HOST``) and port, with the server's secret to inject.

        Cached for a few seconds per process: the proxy asks on every request, and the token and
        ports change only through this backend's own start/restart/stop (which drop the cache).
        """
        cached = self._targets.get((key, service))
        if cached and cached[0] > time.monotonic():
            return cached[1]
        target = self._proxy_target(key, service)
        self._targets[(key, service)] = (time.monotonic() + 10.0, target)
        return target

    def _proxy_target(self, key: str, service: str):
        if service not in (LAB, CODE, APP, WEBUI) or (service in (LAB, CODE) and service not in self.opts.services):
            return None
        name = instance_name(key)
        ns = self._ns(key)
        try:
            svc = self._call(self.core.read_namespaced_service, name, ns)
        except _NotFound:
            return None
        port = next((p for p in (svc.get("spec") or {}).get("ports") or [] if p.get("name") == service), None)
        if port is None:
            return None
        host = self.opts.proxy_host.format(service=name, namespace=ns, key=key)
        # A console outside the cluster reaches a NodePort Service on a node's address (PROXY_HOST).
        number = port.get("nodePort") if self.opts.service_type == "NodePort" else port["port"]
        if not number:
            return None
        tokens = self._tokens(key, {})
        if service in (APP, WEBUI):
            sts = self._read_sts(key, ns)
            template_meta = sts["spec"]["template"].get("metadata") or {}
            annotation = ANNOTATION_APP_BASE if service == APP else ANNOTATION_WEBUI_BASE
            serves_base = (template_meta.get("annotations") or {}).get(annotation) == "true"
            if service == APP and tokens.get(APP):
                return ProxyTarget(
                    host=host,
                    port=number,
                    strip_prefix=not serves_base,
                    headers=(("Authorization", f"Bearer {tokens[APP]}"),),
                    secrets=(tokens[APP],),
                )
            return ProxyTarget(host=host, port=number, strip_prefix=not serves_base)
        if service == LAB:
            secret = tokens[LAB]
            return ProxyTarget(
                host=host, port=number, headers=(("Authorization", f"token {secret}"),), secrets=(secret,)
            )
        secret = tokens[CODE]
        return ProxyTarget(
            host=host, port=number, strip_prefix=True, cookies=((CODE_SERVER_COOKIE, secret),), secrets=(secret,)
        )

    def _tokens(self, key: str, state: dict) -> dict:
        if (state.get("secrets") or {}).get(LAB):
            return state["secrets"]
        try:
            secret = self._call(self.core.read_namespaced_secret, f"{instance_name(key)}-secrets", self._ns(key, state))
        except _NotFound as exc:
            raise PermanentBackendError("The machine's secrets are gone.") from exc
        return _secret_tokens(secret)
