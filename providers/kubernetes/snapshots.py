"""Snapshots of an instance's disk as CSI VolumeSnapshots (``SnapshotsCapability``), where the cluster
has them: ``VOLUME_SNAPSHOT_CLASS`` names the VolumeSnapshotClass to use. Without it the region says it
cannot snapshot (the console answers 409 ``snapshots_not_supported`` before asking); with it, a cluster
that turns out not to serve ``snapshot.storage.k8s.io/v1`` (no CRDs, no snapshot controller) refuses
each snapshot with a message that says so.

- A snapshot is a VolumeSnapshot ``<name>`` in the instance's namespace, of its claim ``inst-…-home``;
  it is ready when the snapshot controller says ``readyToUse`` (until then the task retries), and its
  size is the claim's ``restoreSize``. Kubernetes reports no progress: it jumps to 100 % when ready.
- A restore (the instance stopped: its StatefulSet at zero) deletes the claim and makes it again from
  the snapshot (``dataSource``); a clone's claim is made from the source's snapshot the same way, in
  the same tenant namespace (the same owner).
- Deleting the instance's objects leaves its VolumeSnapshots to ``destroy``, which deletes them by label.
"""

from __future__ import annotations

import contextlib
import re

from providers.base import PermanentBackendError, TransientBackendError
from providers.kubernetes.client import KubeClient, _AlreadyExists, _NotFound
from providers.kubernetes.names import LABEL_BACKEND, LABEL_INSTANCE, LABEL_MANAGED, MANAGED_BY, instance_name

GROUP, VERSION, PLURAL = "snapshot.storage.k8s.io", "v1", "volumesnapshots"
_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "": 1}
NO_API = "This cluster does not serve VolumeSnapshots (snapshot.storage.k8s.io/v1): disks cannot be snapshotted here."


def _bytes(quantity) -> int:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|K|M|G|T|)", str(quantity or "0").strip())
    return int(float(match[1]) * _UNITS[match[2]]) if match else 0


class KubeSnapshots(KubeClient):
    @property
    def supports_snapshots(self) -> bool:  # type: ignore[override]
        """Read from the options, never asked of the cluster (pages show it)."""
        return bool(self.options.get("VOLUME_SNAPSHOT_CLASS"))

    def _snapshot_class(self) -> str:
        name = str(self.options.get("VOLUME_SNAPSHOT_CLASS") or "")
        if not name:
            raise PermanentBackendError(
                "This cluster has no VolumeSnapshot class configured: disks cannot be snapshotted."
            )
        return name

    def snapshot_create(self, *, key: str, state: dict, snapshot: str, progress=None) -> dict:
        """Make VolumeSnapshot ``snapshot`` of the instance's disk, or find it; its size once ready."""
        snapshot_class = self._snapshot_class()
        ns = self._ns(key, state)
        claim = f"{instance_name(key)}-home"
        try:
            self._call(self.core.read_namespaced_persistent_volume_claim, claim, ns)
        except _NotFound as exc:
            raise PermanentBackendError("This machine's disk no longer exists on the cluster.") from exc
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "VolumeSnapshot",
            "metadata": {
                "name": snapshot,
                "namespace": ns,
                "labels": {LABEL_MANAGED: MANAGED_BY, LABEL_BACKEND: self.alias, LABEL_INSTANCE: key},
            },
            "spec": {"volumeSnapshotClassName": snapshot_class, "source": {"persistentVolumeClaimName": claim}},
        }
        try:
            self._call(self.custom.create_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, body)
        except _AlreadyExists:
            pass  # a repeat: the snapshot a previous attempt made
        except _NotFound as exc:
            raise PermanentBackendError(NO_API) from exc
        try:
            found = self._call(self.custom.get_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, snapshot)
        except _NotFound as exc:
            raise TransientBackendError("The snapshot was not there yet; asking again.") from exc
        status = found.get("status") or {}
        if (status.get("error") or {}).get("message"):
            raise PermanentBackendError(f"The cluster could not snapshot the disk: {status['error']['message']}")
        if not status.get("readyToUse"):
            raise TransientBackendError("The cluster is still taking the snapshot.")
        if progress:
            progress(100)
        return {"size_bytes": _bytes(status.get("restoreSize")), "namespace": ns}

    def snapshot_restore(self, *, key: str, state: dict, snapshot: str, snapshot_state: dict) -> None:
        """Make the (stopped) instance's disk again from the snapshot: the claim is deleted and re-made
        with the snapshot as its ``dataSource``. A repeat does it again, to the same content."""
        ns = self._ns(key, state)
        name = instance_name(key)
        try:
            sts = self._call(self.apps.read_namespaced_stateful_set, name, ns)
        except _NotFound as exc:
            raise PermanentBackendError("This machine no longer exists on the cluster.") from exc
        if int((sts.get("spec") or {}).get("replicas") or 0) > 0 or self._pods(key, ns):
            raise PermanentBackendError("The machine is running: stop it before restoring a snapshot.")
        try:
            self._call(self.custom.get_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, snapshot)
        except _NotFound as exc:
            raise PermanentBackendError("This snapshot no longer exists on the cluster.") from exc
        claim = f"{name}-home"
        old = self._call(self.core.read_namespaced_persistent_volume_claim, claim, ns)
        self._delete(self.core.delete_namespaced_persistent_volume_claim, claim, namespace=ns)
        labels = (old.get("metadata") or {}).get("labels") or {}
        manifest = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": ns, "labels": labels},
            "spec": {
                key_: value
                for key_, value in (old.get("spec") or {}).items()
                if key_ in ("accessModes", "resources", "storageClassName", "volumeMode")
            }
            | {"dataSource": {"name": snapshot, "kind": "VolumeSnapshot", "apiGroup": GROUP}},
        }
        try:
            self._call(self.core.create_namespaced_persistent_volume_claim, ns, manifest)
        except _AlreadyExists as exc:  # the old claim is still going (its pod-protection finalizer)
            raise TransientBackendError("The old disk is still being removed; restoring again shortly.") from exc

    def _snapshot_forget(self, ns: str, name: str) -> None:
        with contextlib.suppress(_NotFound):  # already gone is done
            self._call(self.custom.delete_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, name)

    def snapshot_delete(self, *, key: str, state: dict, snapshot: str, snapshot_state: dict) -> None:
        self._snapshot_forget(str((snapshot_state or {}).get("namespace") or self._ns(key, state)), snapshot)

    def snapshots_destroy(self, *, key: str, ns: str) -> None:
        """Delete every VolumeSnapshot of ``key`` (its release); a cluster without the API has none."""
        try:
            found = self._call(
                self.custom.list_namespaced_custom_object, GROUP, VERSION, ns, PLURAL,
                label_selector=f"{LABEL_INSTANCE}={key}",
            )  # fmt: skip
        except _NotFound:
            return
        for item in found.get("items") or []:
            self._snapshot_forget(ns, item["metadata"]["name"])
