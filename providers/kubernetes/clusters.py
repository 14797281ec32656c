"""A multi-node cluster as an instance (``ClustersCapability``): a head StatefulSet and an Indexed Job of
workers (the package's docstring draws them), started, stopped, observed and destroyed whole; with
gang scheduling, a PodGroup or Kueue's admission decides when all ranks start together.
"""

from __future__ import annotations

import contextlib
import secrets

from providers.base import (
    InstanceSpec,
    Observation,
    Observed,
    PermanentBackendError,
    TransientBackendError,
)
from providers.kubernetes.client import STATE_VERSION, KubeClient, _NotFound, _secret_tokens, _with_node
from providers.kubernetes.manifests import (
    cluster_manifests,
    home_pvc_manifest,
    secret_manifest,
    service_manifest,
)
from providers.kubernetes.names import (
    ANNOTATION_STOPPED,
    APP,
    CODE,
    LAB,
    LABEL_CLUSTER,
    LABEL_INSTANCE,
    cluster_name,
    instance_name,
    volume_name,
)
from providers.kubernetes.observation import (
    condition,
    observe_cluster_pods,
    observe_pod,
)


class KubeClusters(KubeClient):
    """The clusters' part of ``KubernetesBackend``: ``start``, ``stop`` and ``poll`` hand a cluster's
    key to the ``_cluster_*`` methods here."""

    def _cluster_command(self, spec: InstanceSpec) -> tuple[str, ...]:
        if spec.app is not None and spec.app.argv:
            return tuple(spec.app.argv)
        return tuple(self.options.get("CLUSTER_COMMAND") or ("sleep", "infinity"))

    def _cluster_start(self, key: str, spec: InstanceSpec) -> dict:
        """Make the cluster's Job (and Service), or find the one a previous attempt made.

        A Job still being deleted (a stop or restart a moment ago) cannot be made again yet: a
        transient error, so the task retries once Kubernetes has finished deleting it.
        """
        if spec.secrets:  # its Job's pods mount no Secret of the owner's yet: refused, never booted without
            raise PermanentBackendError("A cluster cannot be given secrets on Kubernetes yet: choose none for it.")
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

    def cluster_manifests(self, *, key: str, nodes: int, gpus_per_node: int, spec: InstanceSpec, command) -> list:
        return cluster_manifests(
            self.opts,
            alias=self.alias,
            key=key,
            spec=spec,
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            image=(
                spec.app.image
                if spec.app and spec.app.image
                else self.opts.image_for(spec.image, image_ref=spec.image_ref)
            ),
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
