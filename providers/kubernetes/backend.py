"""``KubernetesBackend``: the API client and the ``ProvisioningBackend`` calls, in the order they talk
to the API server. What it sends is built by ``manifests``; what it reads is judged by ``observation``;
the objects it makes are described in the package's docstring.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from kubernetes import client, config, watch
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
    SshTarget,
    TransientBackendError,
    VolumesCapability,
)
from providers.kubernetes.dcgm import samples_by_pod
from providers.kubernetes.manifests import (
    cluster_manifests,
    home_pvc_manifest,
    node_affinity,
    pod_template,
    secret_manifest,
    service_manifest,
    statefulset_manifest,
    tenant_manifests,
    volume_pvc_manifest,
)
from providers.kubernetes.names import (
    ANNOTATION_APP_BASE,
    ANNOTATION_GPUS,
    ANNOTATION_NODE,
    ANNOTATION_STOPPED,
    ANNOTATION_WEBUI_BASE,
    APP,
    CODE,
    JOB_INDEX_LABEL,
    LAB,
    LABEL_BACKEND,
    LABEL_CLUSTER,
    LABEL_INSTANCE,
    LABEL_MANAGED,
    LABEL_TENANT,
    LABEL_VOLUME,
    MANAGED_BY,
    SSH,
    WEBUI,
    cluster_name,
    instance_name,
    volume_name,
)
from providers.kubernetes.observation import (
    PodEvent,
    allocatable_gpus,
    cluster_job_cards,
    condition,
    node_healthy,
    observe_cluster_job,
    observe_cluster_pods,
    observe_machine,
    observe_pod,
    pod_ready,
)
from providers.kubernetes.options import KubeOptions

logger = logging.getLogger(__name__)

STATE_VERSION = 1
CODE_SERVER_COOKIE = "code-server-session"


# --- the API --------------------------------------------------------------------------------------------


class _NotFound(Exception):
    """The API answered 404: for a delete or a read of something gone, "already gone" counts as done."""


class _AlreadyExists(Exception):
    """The API answered 409 on a create: a retry found what the first try made, which counts as done."""


def _status_message(exc) -> tuple[str, str]:
    """The API server's ``Status`` (reason, message) from an ApiException's body, when it has one."""
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        body = {}
    return body.get("reason") or exc.reason or "", body.get("message") or exc.reason or ""


class KubernetesBackend(
    ClustersCapability, VolumesCapability, EntryPointsCapability, GpuMetricsCapability, ProvisioningBackend
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

    def __init__(self, *, alias: str, options: dict | None = None) -> None:
        super().__init__(alias=alias, options=options)
        self.supports_shared_write = bool(self.options.get("VOLUME_RWX", False))
        self._client_lock = threading.Lock()
        self._api_client = None
        self._api_objects: tuple | None = None
        self._opts: KubeOptions | None = None
        self._targets: dict[tuple[str, str], tuple[float, Any]] = {}
        self._namespaces: dict[str, str] = {}  # machine key -> its tenant's namespace, as found
        self._tenants: set[str] = set()  # tenants' namespaces made (or found) fenced by this process

    # --- the client -------------------------------------------------------------------------------

    def _connect(self) -> None:
        with self._client_lock:
            if self._api_client is not None:
                return
            configuration = client.Configuration()
            namespace = self.options.get("NAMESPACE") or ""
            try:
                if self.options.get("IN_CLUSTER"):
                    config.load_incluster_config(client_configuration=configuration)
                    if not namespace:
                        with (
                            contextlib.suppress(OSError),
                            open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f,
                        ):
                            namespace = f.read().strip()
                else:
                    kubeconfig = self.options.get("KUBECONFIG") or None
                    context = self.options.get("CONTEXT") or None
                    config.load_kube_config(
                        config_file=kubeconfig,
                        context=context,
                        client_configuration=configuration,
                        persist_config=False,
                    )
                    if not namespace:
                        contexts, current = config.list_kube_config_contexts(config_file=kubeconfig)
                        chosen = next((c for c in contexts if c["name"] == context), current) if context else current
                        namespace = ((chosen or {}).get("context") or {}).get("namespace") or ""
            except config.ConfigException as exc:
                raise PermanentBackendError(f"The Kubernetes configuration could not be loaded: {exc}") from exc
            # One quick retry of a dropped connection; the console's tasks retry the rest with backoff.
            configuration.retries = 1
            self._opts = KubeOptions.from_options(self.options, namespace=namespace or "default", alias=self.alias)
            self._api_client = client.ApiClient(configuration)

    @property
    def opts(self) -> KubeOptions:
        if self._opts is None:
            self._connect()
        return self._opts

    @property
    def namespace(self) -> str:
        """The console's own namespace (``NAMESPACE``); tenants' machines live in their own."""
        return self.opts.namespace

    def _apis(self):
        """The API groups the backend uses, made once (building them imports the whole client)."""
        if self._api_objects is None:
            self._connect()
            self._api_objects = (
                client.CoreV1Api(self._api_client),
                client.AppsV1Api(self._api_client),
                client.BatchV1Api(self._api_client),
                client.CustomObjectsApi(self._api_client),
                client.NetworkingV1Api(self._api_client),
                client.RbacAuthorizationV1Api(self._api_client),
            )
        return self._api_objects

    @property
    def core(self):
        return self._apis()[0]

    @property
    def apps(self):
        return self._apis()[1]

    @property
    def batch(self):
        return self._apis()[2]

    @property
    def custom(self):
        return self._apis()[3]

    @property
    def networking(self):
        return self._apis()[4]

    @property
    def rbac(self):
        return self._apis()[5]

    def _call(self, method: Callable, *args, _text: bool = False, **kwargs):
        """Call the API; return the answer as a plain dict (as the API server wrote it).

        404 raises ``_NotFound`` and 409 AlreadyExists ``_AlreadyExists`` (the callers decide whether
        those are success); 5xx, 429, a conflict and no answer at all are transient; the rest is the
        API server refusing the request, permanent, with its message.
        """
        kwargs.setdefault("_request_timeout", self.opts.request_timeout_s)
        try:
            response = method(*args, _preload_content=False, **kwargs)
        except ApiException as exc:
            reason, message = _status_message(exc)
            status = exc.status or 0
            if status == 404:
                raise _NotFound(message) from exc
            if status == 409 and reason == "AlreadyExists":
                raise _AlreadyExists(message) from exc
            if status in (409, 429) or status >= 500 or status == 0:
                raise TransientBackendError(f"The Kubernetes API is busy ({status} {reason}): {message}") from exc
            if status in (401, 403):
                raise PermanentBackendError(f"The Kubernetes API refused the console ({status}): {message}") from exc
            raise PermanentBackendError(f"Kubernetes refused the request: {message}") from exc
        except (HTTPError, OSError) as exc:
            raise TransientBackendError(f"The Kubernetes API did not answer: {exc.__class__.__name__}") from exc
        data = response.data
        if _text:  # a pod's own answer through the API server's proxy (the DCGM exporter's text)
            return data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data or "")
        return json.loads(data) if data else None

    def _create(self, method: Callable, read: Callable, manifest: dict, *, key: str = "", label: str = LABEL_INSTANCE):
        """Create ``manifest``; if it exists, return the existing object (it must belong to ``key``)."""
        name = manifest["metadata"]["name"]
        namespace = manifest["metadata"]["namespace"]
        try:
            return self._call(method, namespace, manifest)
        except _NotFound as exc:
            # Its namespace is gone (deleted by hand since this process made it): the retry makes it again.
            self._tenants.discard(namespace)
            raise TransientBackendError(f"The namespace {namespace} is missing; it is made again on retry.") from exc
        except _AlreadyExists:
            try:
                existing = self._call(read, name, namespace)
            except _NotFound as exc:  # deleted between the two calls: let the retry create it
                raise TransientBackendError(f"{name} was being deleted; try again.") from exc
            owner = ((existing.get("metadata") or {}).get("labels") or {}).get(label)
            if key and owner != key:
                raise PermanentBackendError(
                    f"The name {name} is taken by another object ({owner or 'unlabelled'})."
                ) from None
            return existing

    def _delete(self, method: Callable, name: str, *, namespace: str, **kwargs) -> None:
        with contextlib.suppress(_NotFound):
            self._call(method, name, namespace, **kwargs)

    # --- tenants' namespaces ---------------------------------------------------------------------------

    def _ns(self, key: str, state: dict | None = None, spec: InstanceSpec | None = None) -> str:
        """The namespace machine ``key`` lives in: the one its state recorded (a machine made before
        tenants had namespaces recorded the console's), else its owner's (``names.tenant_namespace``)
        when the spec is at hand, else the one this process saw it in, else where the API finds its
        Service (one list across namespaces, then remembered: a machine never moves)."""
        if (state or {}).get("namespace"):
            namespace = state["namespace"]
        elif spec is not None:
            namespace = self.opts.tenant_namespace(spec.owner_ref)
        elif key in self._namespaces:
            return self._namespaces[key]
        else:
            found = self._call(
                self.core.list_service_for_all_namespaces, label_selector=self._selector(f"{LABEL_INSTANCE}={key}")
            )
            items = (found or {}).get("items") or []
            if not items:
                return self.namespace  # not (or no longer) anywhere: reads answer "gone"
            namespace = items[0]["metadata"]["namespace"]
        self._namespaces[key] = namespace
        return namespace

    def _tenant_ensure(self, owner_ref: str) -> str:
        """The tenant's namespace and its fence (``manifests.tenant_manifests``), made before any of its
        objects: a pod never runs there unfenced. What exists is kept, the policy brought up to date (the
        options may have changed); a namespace of that name that is not this console's is refused."""
        manifests = tenant_manifests(self.opts, owner_ref=owner_ref)
        namespace = manifests[0]["metadata"]["name"]
        if namespace in self._tenants:
            return namespace
        try:
            self._call(self.core.create_namespace, manifests[0])
        except _AlreadyExists:
            try:
                existing = self._call(self.core.read_namespace, namespace)
            except _NotFound as exc:
                raise TransientBackendError(f"The namespace {namespace} was being deleted; try again.") from exc
            labels = (existing.get("metadata") or {}).get("labels") or {}
            if labels.get(LABEL_MANAGED) != MANAGED_BY or labels.get(LABEL_TENANT) != owner_ref:
                raise PermanentBackendError(f"The namespace {namespace} exists and is not this tenant's.") from None
        for manifest in manifests[1:]:
            create, patch = {
                "RoleBinding": (self.rbac.create_namespaced_role_binding, self.rbac.patch_namespaced_role_binding),
                "NetworkPolicy": (
                    self.networking.create_namespaced_network_policy,
                    self.networking.patch_namespaced_network_policy,
                ),
                "ResourceQuota": (
                    self.core.create_namespaced_resource_quota,
                    self.core.patch_namespaced_resource_quota,
                ),
            }[manifest["kind"]]
            try:
                self._call(create, namespace, manifest)
            except _AlreadyExists:
                self._call(
                    patch,
                    manifest["metadata"]["name"],
                    namespace,
                    {
                        "metadata": {"labels": manifest["metadata"]["labels"]},
                        # Everything but the kind and the roleRef (immutable): the spec, or the subjects.
                        **{k: v for k, v in manifest.items() if k not in ("apiVersion", "kind", "metadata", "roleRef")},
                    },
                    _content_type="application/merge-patch+json",
                )
        self._tenants.add(namespace)
        return namespace

    def _selector(self, extra: str = "") -> str:
        base = f"{LABEL_MANAGED}={MANAGED_BY},{LABEL_BACKEND}={self.alias}"
        return f"{base},{extra}" if extra else base

    def has_image(self, slug: str) -> bool:
        """Whether ``IMAGES`` maps ``slug``: read from the options, without connecting."""
        return bool((self.options.get("IMAGES") or {}).get(slug))

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
        self.opts.image_for(spec.image)  # an image this region lacks is refused before anything is made
        if spec.nodes > 1:
            return self._cluster_start(key, spec)
        self._volumes_check(spec)
        tokens = self._ensure_workspace(key, spec)
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

    def _read_sts(self, key: str, ns: str) -> dict:
        try:
            return self._call(self.apps.read_namespaced_stateful_set, instance_name(key), ns)
        except _NotFound as exc:
            raise PermanentBackendError("The machine no longer exists.") from exc

    def _pods(self, key: str, ns: str) -> list[dict]:
        found = self._call(self.core.list_namespaced_pod, ns, label_selector=f"{LABEL_INSTANCE}={key}")
        return found.get("items") or []

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

    # --- a cluster as an instance (a head and a Job of workers; see the package's docstring) --------

    def _cluster_command(self, spec: InstanceSpec) -> tuple[str, ...]:
        if spec.app is not None and spec.app.argv:
            return tuple(spec.app.argv)
        return tuple(self.options.get("CLUSTER_COMMAND") or ("sleep", "infinity"))

    def _cluster_start(self, key: str, spec: InstanceSpec) -> dict:
        """Make the cluster's Job (and Service), or find the one a previous attempt made.

        A Job still being deleted (a stop or restart a moment ago) cannot be made again yet: a
        transient error, so the task retries once Kubernetes has finished deleting it.
        """
        ns = self._ns(key, spec=spec)
        try:
            job = self._call(self.batch.read_namespaced_job, cluster_name(key), ns)
        except _NotFound:
            job = None
        if job is not None and (job.get("metadata") or {}).get("deletionTimestamp"):
            raise TransientBackendError("The cluster's previous run is still ending; try again shortly.")
        if job is not None and condition(job, "Failed").get("status") == "True":
            # A failed run (a rank died) is replaced on start: delete it now, make it at the retry.
            self._delete(
                self.batch.delete_namespaced_job, cluster_name(key), propagation_policy="Background", namespace=ns
            )
            raise TransientBackendError("The cluster's failed run is being removed; try again shortly.")
        self._forget(key)
        self._cluster_mark_stopped(key, False, ns)
        command = self._cluster_command(spec)
        state = self.cluster_create(key=key, nodes=spec.nodes, gpus_per_node=spec.gpu_count, spec=spec, command=command)
        # The head outlives a stop (scaled to zero): bring it back with this start's template (app,
        # volumes, image may have changed), as a single machine's start does.
        head = next(
            m
            for m in self.cluster_manifests(
                key=key, nodes=spec.nodes, gpus_per_node=spec.gpu_count, spec=spec, command=command
            )
            if m["kind"] == "StatefulSet"
        )
        self._call(
            self.apps.patch_namespaced_stateful_set,
            instance_name(key),
            ns,
            [
                {"op": "replace", "path": "/spec/template", "value": head["spec"]["template"]},
                {"op": "replace", "path": "/spec/replicas", "value": 1},
            ],
        )
        self._replace_service_ports(key, spec, ns)
        for pod in self._pods(key, ns):
            if observe_pod(pod).state == Observed.DEGRADED:
                self._delete(self.core.delete_namespaced_pod, pod["metadata"]["name"], namespace=ns)
        return {**state, "cluster": True, "gpus": spec.gpu_count}

    def _cluster_mark_stopped(self, key: str, stopped: bool, ns: str) -> None:
        """Say on the cluster's Service that it was stopped on purpose: the console does not keep the
        state a stop returns, so the provider is where a poll tells "stopped" from "its Job was lost"."""
        with contextlib.suppress(_NotFound):
            self._call(
                self.core.patch_namespaced_service,
                cluster_name(key),
                ns,
                {"metadata": {"annotations": {ANNOTATION_STOPPED: "true" if stopped else None}}},
                _content_type="application/merge-patch+json",
            )

    def _cluster_stop(self, key: str, state: dict) -> dict:
        """Delete the workers' Job and scale the head to zero (the pods, and their cards, go); the
        Services, the Secret and the head's home disk stay for the next start."""
        ns = self._ns(key, state)
        self._forget(key)
        self._cluster_mark_stopped(key, True, ns)
        self._delete(self.batch.delete_namespaced_job, cluster_name(key), propagation_policy="Background", namespace=ns)
        with contextlib.suppress(_NotFound):
            self._call(
                self.apps.patch_namespaced_stateful_set,
                instance_name(key),
                ns,
                {"spec": {"replicas": 0}},
                _content_type="application/merge-patch+json",
            )
        if self.opts.gang_scheduling == "coscheduling":
            with contextlib.suppress(_NotFound):
                self._call(
                    self.custom.delete_namespaced_custom_object,
                    "scheduling.x-k8s.io",
                    "v1alpha1",
                    ns,
                    "podgroups",
                    cluster_name(key),
                )
        return dict(state)

    def _cluster_observe(self, key: str, state: dict) -> Observation:
        try:
            ns = self._ns(key, state)
            service = self._call(self.core.read_namespaced_service, cluster_name(key), ns)
        except _NotFound:
            service = None
        except TransientBackendError as exc:
            return Observation(Observed.UNKNOWN, detail=str(exc)[:200])
        stopped = ((service or {}).get("metadata") or {}).get("annotations", {}).get(ANNOTATION_STOPPED) == "true"
        if not stopped:
            return self.cluster_poll(key=key, state=state)
        try:
            self._call(self.batch.read_namespaced_job, cluster_name(key), ns)
        except _NotFound:
            if not self._pods(key, ns):  # the head's pod too
                return Observation(Observed.STOPPED)
        except TransientBackendError as exc:
            return Observation(Observed.UNKNOWN, detail=str(exc)[:200])
        return Observation(Observed.PENDING, detail="shutting down")

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

    def _replace_service_ports(self, key: str, spec: InstanceSpec, ns: str) -> None:
        ports = service_manifest(self.opts, alias=self.alias, key=key, spec=spec)["spec"]["ports"]
        try:
            self._call(
                self.core.patch_namespaced_service,
                instance_name(key),
                ns,
                [{"op": "replace", "path": "/spec/ports", "value": ports}],
            )
        except _NotFound:
            self._create(
                self.core.create_namespaced_service,
                self.core.read_namespaced_service,
                service_manifest(self.opts, alias=self.alias, key=key, spec=spec),
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
        self._delete(self.core.delete_namespaced_persistent_volume_claim, f"{name}-home", namespace=ns)

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

    def _forget(self, key: str) -> None:
        for cache_key in [k for k in self._targets if k[0] == key]:
            self._targets.pop(cache_key, None)

    # --- volumes --------------------------------------------------------------------------------------------

    def volume_create(self, *, key: str, size_gb: int, owner_ref: str = "") -> dict:
        """The volume's claim, in its owner's namespace (``names.tenant_namespace``), where their machines
        mount it; no other tenant's pod can name it."""
        ns = self._tenant_ensure(owner_ref)
        pvc = self._create(
            self.core.create_namespaced_persistent_volume_claim,
            self.core.read_namespaced_persistent_volume_claim,
            volume_pvc_manifest(self.opts, alias=self.alias, key=key, size_gb=size_gb, owner_ref=owner_ref),
            key=key,
            label=LABEL_VOLUME,
        )
        return _volume_state(pvc, ns)

    def volume_resize(self, *, key: str, state: dict, size_gb: int) -> dict:
        """Patch the claim's storage request; the storage class must allow expansion (the API says if not)."""
        ns = state.get("namespace") or self.namespace
        try:
            pvc = self._call(self.core.read_namespaced_persistent_volume_claim, volume_name(key), ns)
        except _NotFound as exc:
            raise PermanentBackendError("The volume no longer exists.") from exc
        current = _gib(pvc["spec"]["resources"]["requests"]["storage"])
        if size_gb < current:
            raise PermanentBackendError(f"A volume can only grow: it has {current} GB.")
        if size_gb == current:
            return _volume_state(pvc, ns)
        pvc = self._call(
            self.core.patch_namespaced_persistent_volume_claim,
            volume_name(key),
            ns,
            {"spec": {"resources": {"requests": {"storage": f"{size_gb}Gi"}}}},
            _content_type="application/merge-patch+json",
        )
        return _volume_state(pvc, ns)

    def volume_destroy(self, *, key: str, state: dict) -> None:
        """Delete the claim. Kubernetes keeps it (Terminating) until no pod mounts it, then deletes it."""
        ns = state.get("namespace") or self.namespace
        self._delete(self.core.delete_namespaced_persistent_volume_claim, volume_name(key), namespace=ns)

    def volume_usage(self, *, key: str, state: dict) -> int | None:
        """Bytes used, from the kubelet's stats of a running pod that mounts it (``VOLUME_USAGE_FROM_KUBELET``).

        Off by default: it needs ``get`` on ``nodes/proxy``, which reaches the kubelet's whole API.
        None when off, when no running pod mounts the volume, or when the API cannot tell now.
        """
        if not self.opts.volume_usage_from_kubelet:
            return None
        claim = volume_name(key)
        ns = state.get("namespace") or self.namespace
        try:
            pods = self._call(self.core.list_namespaced_pod, ns, label_selector=self._selector(LABEL_INSTANCE))
            for pod in pods.get("items") or []:
                node = (pod.get("spec") or {}).get("nodeName")
                claims = {
                    (v.get("persistentVolumeClaim") or {}).get("claimName")
                    for v in (pod.get("spec") or {}).get("volumes") or []
                }
                if not node or claim not in claims or (pod.get("status") or {}).get("phase") != "Running":
                    continue
                summary = self._call(self.core.connect_get_node_proxy_with_path, node, "stats/summary")
                for pod_stats in summary.get("pods") or []:
                    for volume in pod_stats.get("volume") or []:
                        ref = volume.get("pvcRef") or {}
                        if ref.get("name") == claim and ref.get("namespace") == ns:
                            return int(volume.get("usedBytes") or 0)
        except (_NotFound, TransientBackendError, PermanentBackendError):
            return None
        return None

    # --- multi-node clusters ------------------------------------------------------------------------------

    def cluster_manifests(self, *, key: str, nodes: int, gpus_per_node: int, spec: InstanceSpec, command) -> list:
        return cluster_manifests(
            self.opts,
            alias=self.alias,
            key=key,
            spec=spec,
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            image=(spec.app.image if spec.app and spec.app.image else self.opts.image_for(spec.image)),
            command=tuple(command),
            env=spec.app.env if spec.app else (),
        )

    def cluster_create(self, *, key: str, nodes: int, gpus_per_node: int, spec: InstanceSpec, command) -> dict:
        """Create the cluster's Secret, home disk, Services, PodGroup (coscheduling), head and Job.

        What exists is kept: the Secret first, so a retry reads the tokens it holds. The volumes are
        checked first: a ReadWriteOnce claim cannot be written from several nodes.
        """
        ns = self._ns(key, spec=spec)
        self._cluster_volumes_check(spec, nodes)
        head_spec = _with_node(spec, "")
        tokens = self._ensure_workspace(key, head_spec)
        creators = {
            "Service": (self.core.create_namespaced_service, self.core.read_namespaced_service),
            "StatefulSet": (self.apps.create_namespaced_stateful_set, self.apps.read_namespaced_stateful_set),
            "Job": (self.batch.create_namespaced_job, self.batch.read_namespaced_job),
            "PodGroup": (self._create_pod_group, self._read_pod_group),
        }
        manifests = self.cluster_manifests(
            key=key, nodes=nodes, gpus_per_node=gpus_per_node, spec=spec, command=command
        )
        for manifest in manifests:
            create, read = creators[manifest["kind"]]
            label = LABEL_INSTANCE if manifest["kind"] == "StatefulSet" else LABEL_CLUSTER
            self._create(create, read, manifest, key=key, label=label)
        return {
            "v": STATE_VERSION,
            "namespace": ns,
            "name": cluster_name(key),
            "nodes": nodes,
            "secrets": {LAB: tokens[LAB], CODE: tokens[CODE], APP: tokens.get(APP, "")},
        }

    def _ensure_workspace(self, key: str, spec: InstanceSpec) -> dict:
        """The tenant's fenced namespace, then the Secret, the home disk and the instance's Service, shared
        by a machine and a cluster's head."""
        opts = self.opts
        self._tenant_ensure(spec.owner_ref)
        tokens = {LAB: secrets.token_hex(24), CODE: secrets.token_hex(32), APP: secrets.token_hex(24)}
        secret = self._create(
            self.core.create_namespaced_secret,
            self.core.read_namespaced_secret,
            secret_manifest(opts, alias=self.alias, key=key, spec=spec, tokens=tokens),
            key=key,
        )
        tokens = _secret_tokens(secret) or tokens
        self._create(
            self.core.create_namespaced_persistent_volume_claim,
            self.core.read_namespaced_persistent_volume_claim,
            home_pvc_manifest(opts, alias=self.alias, key=key, spec=spec),
            key=key,
        )
        self._create(
            self.core.create_namespaced_service,
            self.core.read_namespaced_service,
            service_manifest(opts, alias=self.alias, key=key, spec=spec),
            key=key,
        )
        return tokens

    def _cluster_volumes_check(self, spec: InstanceSpec, nodes: int) -> None:
        """Every volume exists; one written by several nodes must be ReadWriteMany.

        A ReadWriteOnce claim attaches to one node: the other ranks' pods would wait forever
        ("Multi-Attach error"), so the cluster is refused up front with the reason.
        """
        ns = self.opts.tenant_namespace(spec.owner_ref)
        for mount in spec.volumes:
            try:
                pvc = self._call(self.core.read_namespaced_persistent_volume_claim, volume_name(mount.key), ns)
            except _NotFound as exc:
                raise PermanentBackendError(f"The volume {mount.key} does not exist in this region.") from exc
            modes = (pvc.get("spec") or {}).get("accessModes") or []
            if nodes > 1 and not mount.read_only and "ReadWriteMany" not in modes:
                raise PermanentBackendError(
                    f"The volume {mount.key} ({', '.join(modes) or 'ReadWriteOnce'}) can be written from one node "
                    f"only; a cluster of {nodes} nodes may mount it read-only, or use a region whose storage is "
                    "shared (VOLUME_RWX)."
                )

    def _create_pod_group(self, namespace: str, body: dict, **kwargs):
        return self.custom.create_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", body, **kwargs
        )

    def _read_pod_group(self, name: str, namespace: str, **kwargs):
        return self.custom.get_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", name, **kwargs
        )

    def cluster_poll(self, *, key: str, state: dict) -> Observation:
        """RUNNING only when every node's pod (the head's and the workers') runs; a partial start is
        PENDING with how many are up; the head crash-looping is DEGRADED, as a single machine's pod."""
        try:
            ns = self._ns(key, state)
            job = self._call(self.batch.read_namespaced_job, cluster_name(key), ns)
        except _NotFound:
            return Observation(Observed.GONE)
        except TransientBackendError as exc:
            return Observation(Observed.UNKNOWN, detail=str(exc)[:200])
        wanted = int((job.get("spec") or {}).get("parallelism") or 0)
        failed = condition(job, "Failed")
        if failed.get("status") == "True":
            return Observation(Observed.GONE, detail=f"the cluster's job failed: {failed.get('message', '')}"[:200])
        try:
            self._call(self.apps.read_namespaced_stateful_set, instance_name(key), ns)
        except _NotFound:
            return Observation(Observed.GONE, detail="the cluster's head was deleted")
        except TransientBackendError as exc:
            return Observation(Observed.UNKNOWN, detail=str(exc)[:200])
        wanted += 1  # the head
        if (job.get("spec") or {}).get("suspend"):
            return Observation(Observed.PENDING, detail="queued: waiting for the whole cluster to be admitted")
        try:
            pods = self._call(self.core.list_namespaced_pod, ns, label_selector=f"{LABEL_CLUSTER}={key}").get("items")
        except TransientBackendError as exc:
            return Observation(Observed.UNKNOWN, detail=str(exc)[:200])
        return observe_cluster_pods(pods or [], wanted=wanted)

    def cluster_destroy(self, *, key: str, state: dict) -> None:
        """Delete the Job, the head, both Services, the Secret and the home disk (and the PodGroup), in
        the tenant's namespace; the namespace stays (the tenant's other machines and volumes live there)."""
        ns = self._ns(key, state)
        self._forget(key)
        name = cluster_name(key)
        head = instance_name(key)
        self._delete(self.batch.delete_namespaced_job, name, propagation_policy="Background", namespace=ns)
        self._delete(self.apps.delete_namespaced_stateful_set, head, propagation_policy="Background", namespace=ns)
        self._delete(self.core.delete_namespaced_service, name, namespace=ns)
        self._delete(self.core.delete_namespaced_service, head, namespace=ns)
        self._delete(self.core.delete_namespaced_secret, f"{head}-secrets", namespace=ns)
        self._delete(self.core.delete_namespaced_persistent_volume_claim, f"{head}-home", namespace=ns)
        if self.opts.gang_scheduling == "coscheduling":
            with contextlib.suppress(_NotFound):
                self._call(
                    self.custom.delete_namespaced_custom_object,
                    "scheduling.x-k8s.io",
                    "v1alpha1",
                    ns,
                    "podgroups",
                    name,
                )


# --- helpers ----------------------------------------------------------------------------------------------


def _with_node(spec: InstanceSpec, node: str) -> InstanceSpec:
    return replace(spec, node=node or spec.node)


def _extra(state: dict) -> dict:
    return {k: v for k, v in state.items() if k not in ("v", "namespace", "name", "node", "gpus", "secrets")}


def _secret_tokens(secret: dict | None) -> dict:
    data = (secret or {}).get("data") or {}
    try:
        return {
            LAB: base64.b64decode(data["jupyter-token"]).decode(),
            CODE: base64.b64decode(data["code-hash"]).decode(),
            APP: base64.b64decode(data.get("app-api-key", "")).decode(),
        }
    except (KeyError, ValueError):
        return {}


_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "": 1}


def _gib(quantity: str) -> int:
    """A storage quantity in whole GiB, rounded up (``"50Gi"`` → 50, ``"1Ti"`` → 1024)."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|K|M|G|T|)", str(quantity).strip())
    if not match:
        raise PermanentBackendError(f"Unreadable storage size {quantity!r}.")
    size = float(match[1]) * _UNITS[match[2]]
    return int(-(-size // 2**30))


def _volume_state(pvc: dict, namespace: str) -> dict:
    spec = pvc.get("spec") or {}
    return {
        "v": STATE_VERSION,
        "namespace": namespace,
        "name": pvc["metadata"]["name"],
        "size_gb": _gib(spec["resources"]["requests"]["storage"]),
        "access_mode": (spec.get("accessModes") or ["ReadWriteOnce"])[0],
    }
