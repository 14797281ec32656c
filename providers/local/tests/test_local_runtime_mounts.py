"""The local runtime's volume mounts: each at its path under the instance's home, read-only for real when
the runtime may bind-mount, torn down at stop, and never a way for a release to delete a volume's files."""

from __future__ import annotations

import os

import pytest

from providers.local.runtime import supervisor
from providers.local.runtime.supervisor import LocalRuntime, LocalRuntimeError, Mount

pytestmark = pytest.mark.local

needs_root = pytest.mark.skipif(not supervisor._can_bind_mount(), reason="bind mounts need root")


@pytest.fixture
def runtime(tmp_path):
    runtime = LocalRuntime(root=tmp_path / "root", services=())  # no servers: only the disk and its mounts
    yield runtime
    for key in runtime.instance_keys():
        runtime.destroy(key)


@pytest.fixture
def volume(runtime):
    path = runtime.volume_create("vol-1")
    (path / "weights.bin").write_bytes(b"w" * 5000)
    return path


@needs_root
def test_a_read_only_mount_refuses_every_write_and_stop_takes_it_down(runtime, volume):
    state = runtime.start("a1", mounts=[Mount(str(volume), "/models/mine", read_only=True)])
    target = runtime.paths("a1").home / "models/mine"
    assert state["mounts"] == [{"path": "/models/mine", "read_only": True, "enforced": True}]
    assert (target / "weights.bin").read_bytes() == b"w" * 5000
    with pytest.raises(OSError, match="Read-only file system"):
        (target / "new").write_text("x")
    with pytest.raises(OSError, match="Read-only file system"):
        (target / "weights.bin").unlink()
    runtime.stop("a1")
    assert not supervisor._mountpoints_under(runtime.paths("a1").base)
    assert runtime.mounts("a1") == []
    runtime.start("a1")  # no mounts given: the ones it had come back
    assert supervisor._is_mountpoint(target)


def test_a_read_write_mount_is_a_link_to_the_volume(runtime, volume):
    runtime.start("a1", mounts=[Mount(str(volume), "/mnt/train")])
    target = runtime.paths("a1").home / "mnt/train"
    assert target.is_symlink() and target.resolve() == volume
    (target / "out.txt").write_text("written")
    assert (volume / "out.txt").read_text() == "written"


def test_without_the_right_to_mount_read_only_is_a_link_and_says_it_is_not_enforced(runtime, volume, monkeypatch):
    monkeypatch.setattr(supervisor, "_can_bind_mount", lambda: False)
    state = runtime.start("a1", mounts=[Mount(str(volume), "/data/ro", read_only=True)])
    assert state["mounts"] == [{"path": "/data/ro", "read_only": True, "enforced": False}]
    assert (runtime.paths("a1").home / "data/ro").is_symlink()


def test_destroy_unmounts_first_and_leaves_every_volume_file(runtime, volume):
    runtime.start("a1", mounts=[Mount(str(volume), "/mnt/rw"), Mount(str(volume), "/models/ro", read_only=True)])
    runtime.destroy("a1")
    assert not runtime.paths("a1").base.exists()
    assert (volume / "weights.bin").read_bytes() == b"w" * 5000


def test_new_mounts_replace_the_old_ones_at_the_next_start(runtime, volume):
    other = runtime.volume_create("vol-2")
    runtime.start("a1", mounts=[Mount(str(volume), "/mnt/a", read_only=True)])
    runtime.stop("a1")
    runtime.start("a1", mounts=[Mount(str(other), "/mnt/b")])
    home = runtime.paths("a1").home
    assert not (home / "mnt/a").exists()
    assert (home / "mnt/b").resolve() == other
    assert [m["path"] for m in runtime.mounts("a1")] == ["/mnt/b"]


def test_the_users_own_files_in_the_way_are_never_deleted(runtime, volume):
    runtime.start("a1")
    mine = runtime.paths("a1").home / "mnt/data"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("mine")
    runtime.stop("a1")
    with pytest.raises(LocalRuntimeError, match="already holds files"):
        runtime.start("a1", mounts=[Mount(str(volume), "/mnt/data")])
    assert (mine / "notes.txt").read_text() == "mine"


def test_a_missing_volume_is_refused(runtime, tmp_path):
    with pytest.raises(LocalRuntimeError, match="does not exist"):
        runtime.start("a1", mounts=[Mount(str(tmp_path / "nowhere"), "/mnt/x")])


def test_usage_counts_the_blocks_files_take_and_hard_links_once(runtime, volume):
    before = runtime.volume_usage("vol-1")
    (volume / "big").write_bytes(os.urandom(1 << 20))
    os.link(volume / "big", volume / "big-again")
    after = runtime.volume_usage("vol-1")
    assert (1 << 20) <= after - before < (1 << 20) + 64 * 1024
    assert runtime.volume_usage("never-made") is None
    runtime.volume_destroy("vol-1")
    assert not volume.exists()
