"""Snapshots on a Slurm cluster (its in-process fake, real files): the instance's ``home`` folder is copied
into the console's own ``ROOT/.snapshots/<key>`` (out of the tenant's folder), restored only while no job
of the instance runs, copied into a clone's folder at its create, and removed with the instance."""

from __future__ import annotations

import pytest

from providers import PermanentBackendError
from providers.slurm.backend import SlurmBackend
from providers.slurm.tests.slurm_fake import FakeSlurm, FakeTenantAccounts, spec


@pytest.fixture
def slurm(tmp_path):
    backend = SlurmBackend(
        alias="slurm",
        # wall-clock: the fake ends jobs at once; END_WAIT_S only bounds a wait that never happens here
        options={"ROOT": str(tmp_path / "slurm"), "SERVICES": [], "GPU_TYPES": {"h200": "h200"}, "END_WAIT_S": 1},
    )
    fake = FakeSlurm(prefix=backend.prefix, nodes=("gpu01", "gpu02"))
    backend.api = fake
    backend.tenants = FakeTenantAccounts()
    return backend, fake


def test_snapshot_restore_clone_and_release_on_the_shared_filesystem(slurm, tmp_path):
    backend, fake = slurm
    assert backend.supports_snapshots
    state = backend.create(key="box", spec=spec(gpu_count=1))
    fake.advance()
    home = tmp_path / "slurm" / "box" / "home"
    (home / "model.txt").write_text("epoch 1")
    answer = backend.snapshot_create(key="box", state=state, snapshot="snap-1")
    assert answer["size_bytes"] > 0
    assert backend.snapshot_create(key="box", state=state, snapshot="snap-1") == answer  # a repeat: the same
    kept = tmp_path / "slurm" / ".snapshots" / "box" / "snap-1"
    assert (kept / "model.txt").read_text() == "epoch 1"
    assert oct((tmp_path / "slurm" / ".snapshots").stat().st_mode & 0o777) == "0o700"  # the console's, not the tenant's

    (home / "model.txt").write_text("epoch 9")
    with pytest.raises(PermanentBackendError, match="stop it"):
        backend.snapshot_restore(key="box", state=state, snapshot="snap-1", snapshot_state=answer)
    state = backend.stop(key="box", state=state)
    backend.snapshot_restore(key="box", state=state, snapshot="snap-1", snapshot_state=answer)
    assert (home / "model.txt").read_text() == "epoch 1"

    backend.create(key="twin", spec=spec(gpu_count=1, disk_from={"key": "box", "snapshot": "snap-1", "state": answer}))
    assert (tmp_path / "slurm" / "twin" / "home" / "model.txt").read_text() == "epoch 1"

    backend.snapshot_delete(key="box", state=state, snapshot="snap-1", snapshot_state=answer)
    backend.snapshot_delete(key="box", state=state, snapshot="snap-1", snapshot_state=answer)  # gone is done
    assert not kept.exists()
    backend.snapshot_create(key="box", state=state, snapshot="snap-2")
    backend.destroy(key="box", state=state)
    assert not (tmp_path / "slurm" / ".snapshots" / "box").exists()  # released with the instance


def test_a_disk_that_is_gone_cannot_be_snapshotted(slurm):
    backend, _fake = slurm
    with pytest.raises(PermanentBackendError):
        backend.snapshot_create(key="never", state={}, snapshot="snap-1")
