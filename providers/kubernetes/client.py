"""The Kubernetes API as the backend's parts share it: one client per process, the API groups, calls
that turn the API's answers into the provider contract's errors, tenants' namespaces made fenced before
anything else, and the reads and writes every machine shares (its StatefulSet, pods and Service).

``KubeClient``'s subclasses (``volumes.KubeVolumes``, ``clusters.KubeClusters``, and
``backend.KubernetesBackend`` over them) call the API only through ``_call``, ``_create`` and ``_delete``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from providers.base import (
    InstanceSpec,
    PermanentBackendError,
    ProvisioningBackend,
    TransientBackendError,
)
from providers.kubernetes.manifests import (
    service_manifest,
    tenant_manifests,
)
from providers.kubernetes.names import (
    APP,
    CODE,
    LAB,
    LABEL_BACKEND,
    LABEL_INSTANCE,
    LABEL_MANAGED,
    LABEL_TENANT,
    MANAGED_BY,
    instance_name,
)
from providers.kubernetes.options import KubeOptions

STATE_VERSION = 1


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


class KubeClient(ProvisioningBackend):
    """The API client and namespaces: the base of the backend's parts (a cooperative __init__)."""

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

    def _read_sts(self, key: str, ns: str) -> dict:
        try:
            return self._call(self.apps.read_namespaced_stateful_set, instance_name(key), ns)
        except _NotFound as exc:
            raise PermanentBackendError("The machine no longer exists.") from exc

    def _pods(self, key: str, ns: str) -> list[dict]:
        found = self._call(self.core.list_namespaced_pod, ns, label_selector=f"{LABEL_INSTANCE}={key}")
        return found.get("items") or []

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

    def _forget(self, key: str) -> None:
        for cache_key in [k for k in self._targets if k[0] == key]:
            self._targets.pop(cache_key, None)
