"""Snapshots on Kubernetes against the fake API server: with ``VOLUME_SNAPSHOT_CLASS`` a snapshot is a
VolumeSnapshot of the instance's claim, ready when the snapshot controller says so (the task retries
until then), restored by making the claim again from it while the machine is stopped, copied into a
clone's claim, and deleted with the instance; without the option the region cannot snapshot, and a
cluster that does not serve the API says so."""

from __future__ import annotations

import pytest

from providers.base import PermanentBackendError, TransientBackendError
from providers.kubernetes.tests.k8s_fake import fake_api_server
from providers.kubernetes.tests.test_kubernetes_backend import KEY, NAME, backend_for, spec


@pytest.fixture
def api(tmp_path):
    with fake_api_server(tmp_path) as server:
        server.cluster.add_node("gpu-a", product="NVIDIA-H200", gpus=8)
        yield server


def _running(api, backend, key=KEY, **changes):
    state = backend.create(key=key, spec=spec(**changes))
    api.cluster.advance()
    return state


def test_without_a_snapshot_class_the_region_cannot_snapshot(api):
    backend = backend_for(api)
    assert not backend.supports_snapshots
    with pytest.raises(PermanentBackendError, match="no VolumeSnapshot class"):
        backend.snapshot_create(key=KEY, state={}, snapshot="snap-1")


def test_a_cluster_without_the_snapshot_api_says_so(api):
    backend = backend_for(api, VOLUME_SNAPSHOT_CLASS="csi-snapclass")
    state = _running(api, backend)
    api.cluster.snapshot_api = False
    with pytest.raises(PermanentBackendError, match="does not serve VolumeSnapshots"):
        backend.snapshot_create(key=KEY, state=state, snapshot="snap-1")


def test_snapshot_restore_clone_and_release(api):
    backend = backend_for(api, VOLUME_SNAPSHOT_CLASS="csi-snapclass")
    assert backend.supports_snapshots
    state = _running(api, backend)
    with pytest.raises(TransientBackendError, match="still taking"):
        backend.snapshot_create(key=KEY, state=state, snapshot="snap-1")  # not ready yet: the task retries
    snap = api.cluster.get("volumesnapshots", "snap-1")
    assert snap["spec"] == {
        "volumeSnapshotClassName": "csi-snapclass",
        "source": {"persistentVolumeClaimName": f"{NAME}-home"},
    }
    api.cluster.advance()
    answer = backend.snapshot_create(key=KEY, state=state, snapshot="snap-1")  # the repeat finds it, ready
    assert answer["size_bytes"] == 50 * 2**30

    with pytest.raises(PermanentBackendError, match="stop it"):
        backend.snapshot_restore(key=KEY, state=state, snapshot="snap-1", snapshot_state=answer)
    state = backend.stop(key=KEY, state=state)
    api.cluster.advance()
    backend.snapshot_restore(key=KEY, state=state, snapshot="snap-1", snapshot_state=answer)
    claim = api.cluster.get("persistentvolumeclaims", f"{NAME}-home")
    assert claim["spec"]["dataSource"] == {
        "name": "snap-1",
        "kind": "VolumeSnapshot",
        "apiGroup": "snapshot.storage.k8s.io",
    }
    assert claim["metadata"]["labels"]["console.gpu/instance"] == KEY

    twin = "7a2d3b0c-14ef-4f00-9000-000000000003"
    backend.create(key=twin, spec=spec(disk_from={"key": KEY, "snapshot": "snap-1", "state": answer}))
    twin_claim = api.cluster.get("persistentvolumeclaims", "inst-7a2d3b0c14ef-home")
    assert twin_claim["spec"]["dataSource"]["name"] == "snap-1"

    backend.snapshot_delete(key=KEY, state=state, snapshot="snap-1", snapshot_state=answer)
    backend.snapshot_delete(key=KEY, state=state, snapshot="snap-1", snapshot_state=answer)  # gone is done
    assert api.cluster.get("volumesnapshots", "snap-1") is None
    with pytest.raises(TransientBackendError):
        backend.snapshot_create(key=KEY, state=state, snapshot="snap-2")
    backend.destroy(key=KEY, state=state)
    assert api.cluster.get("volumesnapshots", "snap-2") is None  # released with the instance
