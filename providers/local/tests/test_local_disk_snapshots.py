"""Snapshots of an instance's disk on this host, with real files: a sparse copy of ``home.img`` (only what
was written is copied), restored over the disk to give the old content back; the process runtime's
``home/`` folder the same way; a running instance's restore is refused; a clone's disk is seeded from one."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from providers.local.runtime.base import LocalRuntimeError
from providers.local.runtime.container_files import home_mount, home_unmount
from providers.local.runtime.container_spec import ContainerPaths
from providers.local.runtime.disk_snapshots import DiskSnapshots, allocated_bytes, sparse_copy
from providers.local.tests.local_helpers import runtime_or_skip

MiB = 2**20


def _image_snapshots(root: Path) -> DiskSnapshots:
    return DiskSnapshots(
        disk=lambda key: root / key / "home.img", mountpoint=lambda key: root / key / "home", root=root
    )


def _sparse_disk(path: Path, size: int = 2**30) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.truncate(size)
        handle.seek(0)
        handle.write(b"first" * 1000)
        handle.seek(700 * MiB)
        handle.write(b"x" * MiB)


def test_a_sparse_copy_keeps_the_holes_and_reports_progress(tmp_path):
    source, target = tmp_path / "disk.img", tmp_path / "copy.img"
    _sparse_disk(source)
    seen = []
    sparse_copy(source, target, seen.append)
    assert target.read_bytes()[:5000] == b"first" * 1000
    assert target.stat().st_size == source.stat().st_size
    assert allocated_bytes(target) < 16 * MiB  # a 1 GiB disk with 1 MiB written: not 1 GiB copied
    assert seen[-1] == 100 and seen == sorted(seen)


def test_snapshot_then_restore_of_home_img_gives_the_old_content_back(tmp_path):
    snapshots = _image_snapshots(tmp_path)
    disk = tmp_path / "k1" / "home.img"
    _sparse_disk(disk)
    size = snapshots.create("k1", "snap-1")
    assert 0 < size < 16 * MiB
    assert snapshots.create("k1", "snap-1") == size  # a repeat answers the same snapshot
    with open(disk, "r+b") as handle:
        handle.write(b"later" * 1000)
    snapshots.restore("k1", "snap-1")
    assert disk.read_bytes()[:5000] == b"first" * 1000
    snapshots.delete("k1", "snap-1")
    snapshots.delete("k1", "snap-1")  # already gone is done
    assert not (tmp_path / "k1" / "snapshots" / "snap-1.img").exists()
    with pytest.raises(LocalRuntimeError):
        snapshots.restore("k1", "snap-1")


def test_a_bad_name_is_refused(tmp_path):
    with pytest.raises(LocalRuntimeError):
        _image_snapshots(tmp_path).path("k1", "../escape")


def _loop_mount_or_skip(paths: ContainerPaths) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting the disk needs root")
    try:
        home_mount(paths, {"tenant": {"uid_base": 200000}, "disk_gb": 1})
    except LocalRuntimeError as exc:
        pytest.skip(f"no loop mounts here: {exc}")


def test_an_ext4_disk_snapshotted_while_mounted_restores_its_files(tmp_path):
    """The container runtime's disk as it runs: ext4 in home.img, loop-mounted; the snapshot freezes it."""
    paths = ContainerPaths(tmp_path / "k2")
    paths.base.mkdir()
    _loop_mount_or_skip(paths)
    snapshots = _image_snapshots(tmp_path)
    try:
        (paths.home / "notes.txt").write_text("kept by the snapshot")
        subprocess.run(["sync"], check=True)
        snapshots.create("k2", "snap-a")
        (paths.home / "notes.txt").write_text("changed afterwards")
        with pytest.raises(LocalRuntimeError, match="stop the instance"):
            snapshots.restore("k2", "snap-a")  # mounted: the instance runs
    finally:
        home_unmount(paths)
    snapshots.restore("k2", "snap-a")
    home_mount(paths, {"tenant": {"uid_base": 200000}, "disk_gb": 1})
    try:
        assert (paths.home / "notes.txt").read_text() == "kept by the snapshot"
    finally:
        home_unmount(paths)


@pytest.mark.local
def test_the_process_runtime_snapshots_home_and_restores_it_once_stopped(tmp_path):
    runtime = runtime_or_skip(tmp_path, ("ssh",))
    key = "proc-1"
    try:
        runtime.start(key, gpus=[])
        home = runtime.paths(key).home
        (home / "train.py").write_text("print('v1')")
        assert runtime.snapshot_create(key, "snap-p") > 0
        (home / "train.py").write_text("print('v2')")
        with pytest.raises(LocalRuntimeError, match="stop it"):
            runtime.snapshot_restore(key, "snap-p")
        runtime.stop(key)
        runtime.snapshot_restore(key, "snap-p")
        assert (home / "train.py").read_text() == "print('v1')"
        # A clone: a new instance whose disk starts as the snapshot's copy.
        runtime.disk_seed("proc-2", source_key=key, snapshot="snap-p")
        assert (runtime.paths("proc-2").home / "train.py").read_text() == "print('v1')"
    finally:
        for made in runtime.instance_keys():
            runtime.destroy(made)


def test_a_volume_mounted_inside_a_folder_disk_is_left_out_of_its_snapshot(tmp_path):
    """The process engine bind-mounts a read-only volume into the home folder: it is not the disk."""
    if os.geteuid() != 0:
        pytest.skip("a bind mount needs root")
    home, volume = tmp_path / "k3" / "home", tmp_path / "volume"
    (home / "data").mkdir(parents=True)
    volume.mkdir()
    (volume / "dataset.bin").write_bytes(b"not the disk's")
    (home / "mine.txt").write_text("the disk's")
    if subprocess.run(["mount", "--bind", str(volume), str(home / "data")], check=False).returncode != 0:
        pytest.skip("no bind mounts here")
    try:
        snapshots = DiskSnapshots(disk=lambda key: tmp_path / key / "home", mountpoint=lambda key: None, root=tmp_path)
        snapshots.create("k3", "snap-v")
    finally:
        subprocess.run(["umount", str(home / "data")], check=False)
    copy = snapshots.path("k3", "snap-v")
    assert (copy / "mine.txt").read_text() == "the disk's"
    assert not (copy / "data" / "dataset.bin").exists()
