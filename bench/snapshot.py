"""Benchmark: a snapshot and a restore of an instance's disk with 1 GiB written, on this host (issue #27).

The container runtime's disk as an instance has it: ``home.img``, an ext4 file of ``--disk-gb`` (sparse),
loop-mounted at ``home/``, with ``--mib`` MiB of random bytes written into it (files of 64 MiB, synced).
Then, ``--runs`` times, ``ContainerRuntime.snapshot_create`` (the code the console's worker runs: the
disk frozen while it is copied, only its written extents copied, or a reflink where the filesystem has
them) while it is mounted, as for a running instance; the disk is unmounted (a stopped instance) and
``ContainerRuntime.snapshot_restore`` copies the snapshot back over it. Each snapshot is deleted before
the next. Printed: each run, then one JSON line with the medians.

No database, no Django, no podman container: root (for the loop mount) and mkfs.ext4.

    sudo .venv/bin/python bench/snapshot.py [--mib 1024] [--disk-gb 20] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from providers.local.runtime.container_files import home_mount, home_unmount  # noqa: E402
from providers.local.runtime.containers import ContainerRuntime  # noqa: E402
from providers.local.runtime.disk_snapshots import allocated_bytes  # noqa: E402
from providers.local.runtime.podman import Podman  # noqa: E402

UID_BASE = 3_100_000_000  # far above any range the console hands out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024, help="what is written on the disk (MiB)")
    parser.add_argument("--disk-gb", type=int, default=20, help="the disk's size (GB)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", default="", help="where the disk lives (default: a temporary folder)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("the disk is loop-mounted as an instance's is: run as root")
    scratch = Path(tempfile.mkdtemp(prefix="bench-snapshot-", dir=args.dir or None))
    runtime = ContainerRuntime(root=scratch / "instances", podman=Podman())
    key = f"bench-{uuid.uuid4().hex[:8]}"
    paths = runtime.paths(key)
    meta = {"key": key, "tenant": {"uid_base": UID_BASE, "uid_count": 65536}, "disk_gb": args.disk_gb}
    snapshot_s, restore_s, sizes = [], [], []
    try:
        paths.base.mkdir(parents=True)
        runtime._save_meta(paths, meta)  # what a start writes, as far as a snapshot reads it
        home_mount(paths, meta)
        clock = time.monotonic()
        files = max(1, args.mib // 64)
        for n in range(files):
            with open(paths.home / f"blob-{n}", "wb") as handle:
                handle.write(os.urandom(args.mib * 2**20 // files))
        subprocess.run(["sync", "-f", str(paths.home)], check=True)
        print(f"wrote {args.mib} MiB of random bytes on a {args.disk_gb} GB disk in {time.monotonic() - clock:.1f} s")
        expected = (paths.home / "blob-0").read_bytes()[:4096]
        for run in range(args.runs):
            name = f"snap-{run}"
            if not os.path.ismount(paths.home):
                home_mount(paths, meta)
            clock = time.monotonic()
            runtime.snapshot_create(key, name)  # mounted: frozen while copied, as for a running instance
            snapshot_s.append(time.monotonic() - clock)
            sizes.append(allocated_bytes(runtime._disk_snapshots().path(key, name)))
            (paths.home / "blob-0").write_bytes(b"changed after the snapshot")
            home_unmount(paths)  # stopped, as ContainerRuntime.stop leaves it
            runtime._save_meta(paths, {**meta, "should_run": False})
            clock = time.monotonic()
            runtime.snapshot_restore(key, name)
            restore_s.append(time.monotonic() - clock)
            home_mount(paths, meta)
            assert (paths.home / "blob-0").read_bytes()[:4096] == expected, "the restore lost the snapshot's content"
            runtime.snapshot_delete(key, name)
            print(
                f"run {run + 1}: snapshot {snapshot_s[-1]:.2f} s ({sizes[-1] / 2**20:.0f} MiB), restore {restore_s[-1]:.2f} s"
            )
        result = {
            "written_mib": args.mib,
            "disk_gb": args.disk_gb,
            "runs": args.runs,
            "snapshot_s_median": round(statistics.median(snapshot_s), 2),
            "restore_s_median": round(statistics.median(restore_s), 2),
            "snapshot_s_max": round(max(snapshot_s), 2),
            "restore_s_max": round(max(restore_s), 2),
            "snapshot_mib": round(statistics.median(sizes) / 2**20, 1),
        }
        print(json.dumps(result))
    finally:
        home_unmount(paths)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
