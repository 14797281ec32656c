"""Volumes as PersistentVolumeClaims in their owner's namespace (``VolumesCapability``): made, grown,
deleted and measured. ReadWriteMany with ``VOLUME_RWX``, else ReadWriteOnce.
"""

from __future__ import annotations

import re

from providers.base import (
    PermanentBackendError,
    TransientBackendError,
)
from providers.kubernetes.client import STATE_VERSION, KubeClient, _NotFound
from providers.kubernetes.manifests import (
    volume_pvc_manifest,
)
from providers.kubernetes.names import (
    LABEL_INSTANCE,
    LABEL_VOLUME,
    volume_name,
)

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


class KubeVolumes(KubeClient):
    """The volumes' part of ``KubernetesBackend``."""

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
