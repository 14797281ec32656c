"""Snapshots of an instance's disk on this host: copies kept in ``<root>/<key>/snapshots/``.

The container runtime's disk is ``home.img`` (an ext4 file, sparse): a snapshot is a sparse copy of it,
``<name>.img`` (a reflink where the filesystem has them, else only its written extents are copied, so
a 50 GB disk with 1 GiB written copies 1 GiB). The process runtime's disk is the ``home/`` folder: a
snapshot is a copy of the folder, ``<name>/`` (``cp -a --reflink=auto``).

A running container's disk is frozen (``fsfreeze``) for the copy, so the copy is a consistent
filesystem: writes inside the instance wait a moment, nothing fails. Restore wants the instance
stopped: it copies the snapshot beside the disk and swaps it in with one rename, so a restore cut
short leaves the old disk whole. The snapshots live in the instance's folder: releasing the instance
deletes them with it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from providers.local.runtime.base import LocalRuntimeError

NAME_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
FICLONE = 0x40049409  # linux/fs.h: share the source's blocks (btrfs, XFS with reflink=1)
CHUNK = 64 * 2**20

Progress = Callable[[int], None] | None


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name or ""):
        raise LocalRuntimeError(f"invalid snapshot name {name!r}")
    return name


def allocated_bytes(path: Path) -> int:
    """What a file or a folder takes on disk (a sparse file's written blocks, not its length)."""
    if path.is_file():
        return path.stat().st_blocks * 512
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
    return total


def _extents(fd: int, size: int) -> list[tuple[int, int]]:
    """The (offset, length) runs of ``fd`` that hold data (SEEK_DATA / SEEK_HOLE); the whole file where
    the filesystem cannot say."""
    runs, offset = [], 0
    try:
        while offset < size:
            try:
                start = os.lseek(fd, offset, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # nothing but a hole from here to the end
                    break
                raise
            end = os.lseek(fd, start, os.SEEK_HOLE)
            runs.append((start, end - start))
            offset = end
    except OSError:
        return [(0, size)]
    return runs


def sparse_copy(source: Path, target: Path, progress: Progress = None) -> None:
    """Copy file ``source`` to ``target`` keeping its holes: a reflink when the filesystem shares blocks,
    else each written extent with ``copy_file_range`` (in the kernel, no trip through user space).
    ``progress`` gets the percentage copied now and then."""
    size = source.stat().st_size
    with open(source, "rb") as src, open(target, "wb") as dst:
        os.fchmod(dst.fileno(), 0o600)
        try:
            fcntl.ioctl(dst.fileno(), FICLONE, src.fileno())
            if progress:
                progress(100)
            return
        except OSError:
            pass
        dst.truncate(size)
        runs = _extents(src.fileno(), size)
        total = sum(length for _start, length in runs) or 1
        done, shown = 0, -1
        for start, length in runs:
            copied = 0
            while copied < length:
                want = min(CHUNK, length - copied)
                try:
                    n = os.copy_file_range(src.fileno(), dst.fileno(), want, start + copied, start + copied)
                except OSError:
                    os.lseek(src.fileno(), start + copied, os.SEEK_SET)
                    os.lseek(dst.fileno(), start + copied, os.SEEK_SET)
                    n = os.write(dst.fileno(), os.read(src.fileno(), want))
                if n <= 0:
                    break
                copied += n
                done += n
                percent = min(99, done * 100 // total)
                if progress and percent // 5 != shown // 5:
                    shown = percent
                    progress(percent)
        os.fsync(dst.fileno())
    if progress:
        progress(100)


def mountpoints_under(folder: Path) -> list[Path]:
    """What is mounted below ``folder`` now (a read-only volume the process engine bind-mounts into the
    instance's home), from /proc/self/mountinfo; none where it cannot be read."""
    prefix = str(folder).rstrip("/") + "/"
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) > 4:
            point = fields[4].encode().decode("unicode_escape")  # \040 for a space
            if point.startswith(prefix):
                found.append(Path(point))
    return found


def tree_copy(source: Path, target: Path, progress: Progress = None) -> None:
    """Copy folder ``source`` to ``target`` as it is (owners, modes, links), sharing blocks where it can.
    What is mounted inside it (a volume) is not the disk: left out (tar, excluding them, when any is)."""
    mounted = mountpoints_under(source)
    if mounted:
        target.mkdir(mode=0o700)
        shutil.copystat(source, target)
        excludes = [f"--exclude=./{point.relative_to(source)}" for point in mounted]
        packed = subprocess.Popen(  # noqa: S603
            ["tar", "-C", str(source), "--anchored", *excludes, "-cf", "-", "."],  # noqa: S607
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        result = subprocess.run(  # noqa: S603
            ["tar", "-C", str(target), "--same-owner", "-xpf", "-"],  # noqa: S607
            stdin=packed.stdout,
            capture_output=True,
            text=True,
            check=False,
        )
        packed.stdout.close()
        packed.wait()
    else:
        result = subprocess.run(  # noqa: S603
            ["cp", "-a", "--reflink=auto", "--sparse=always", "--", str(source), str(target)],  # noqa: S607
            capture_output=True,
            text=True,
            check=False,
        )
    if result.returncode != 0:
        shutil.rmtree(target, ignore_errors=True)
        raise LocalRuntimeError(f"the disk could not be copied: {result.stderr.strip()[-300:]}")
    if progress:
        progress(100)


@contextlib.contextmanager
def frozen(mountpoint: Path):
    """Hold writes to the filesystem mounted at ``mountpoint`` while the block is copied (``fsfreeze``);
    nothing to freeze when it is not mounted."""
    if not os.path.ismount(mountpoint):
        yield
        return
    subprocess.run(["sync", "-f", str(mountpoint)], capture_output=True, check=False)  # noqa: S603,S607
    froze = subprocess.run(["fsfreeze", "-f", str(mountpoint)], capture_output=True, check=False)  # noqa: S603,S607
    try:
        yield
    finally:
        if froze.returncode == 0:
            subprocess.run(["fsfreeze", "-u", str(mountpoint)], capture_output=True, check=False)  # noqa: S603,S607


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


class DiskSnapshots:
    """Snapshots of the disks of one runtime's instances: ``disk`` is where an instance's disk lives
    (``home.img`` or ``home/``), ``mountpoint`` where it is mounted while it runs (or None), ``folder``
    where its snapshots are kept (default: ``<root>/<key>/snapshots``). Copies in the making are kept in
    that folder too, out of the tenant's reach where the disk's own folder is the tenant's (Slurm)."""

    def __init__(
        self,
        *,
        disk: Callable[[str], Path],
        mountpoint: Callable[[str], Path | None],
        root: Path,
        folder: Callable[[str], Path] | None = None,
    ) -> None:
        self.disk = disk
        self.mountpoint = mountpoint
        self.root = root
        self._folder = folder

    def folder(self, key: str) -> Path:
        return self._folder(key) if self._folder is not None else self.root / key / "snapshots"

    def path(self, key: str, name: str) -> Path:
        disk = self.disk(key)
        return self.folder(key) / (f"{check_name(name)}.img" if disk.suffix == ".img" else check_name(name))

    def create(self, key: str, name: str, progress: Progress = None) -> int:
        """Copy ``key``'s disk to snapshot ``name``; its size in bytes. A snapshot already there answers
        its size again."""
        target = self.path(key, name)
        if target.exists():
            return allocated_bytes(target)
        disk = self.disk(key)
        if not disk.exists():
            raise LocalRuntimeError("this instance has no disk yet: start it once first")
        self.folder(key).mkdir(mode=0o700, parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".part")
        _remove(partial)
        mountpoint = self.mountpoint(key)
        try:
            if disk.is_dir():
                tree_copy(disk, partial, progress)
            else:
                with frozen(mountpoint) if mountpoint is not None else contextlib.nullcontext():
                    sparse_copy(disk, partial, progress)
        except OSError as exc:
            _remove(partial)
            raise LocalRuntimeError(f"the disk could not be copied: {exc}") from exc
        os.replace(partial, target)
        return allocated_bytes(target)

    def restore(self, key: str, name: str, progress: Progress = None) -> None:
        """Replace ``key``'s disk (unmounted: a stopped instance) with a copy of snapshot ``name``."""
        source = self.path(key, name)
        if not source.exists():
            raise LocalRuntimeError("this snapshot is no longer on this host")
        mountpoint = self.mountpoint(key)
        if mountpoint is not None and os.path.ismount(mountpoint):
            raise LocalRuntimeError("the instance's disk is in use: stop the instance first")
        self.copy_in(key, source, progress)

    def copy_in(self, key: str, source: Path, progress: Progress = None) -> None:
        """Make ``key``'s disk a copy of ``source`` (a snapshot file or folder): copied beside, swapped in."""
        disk = self.disk(key)
        disk.parent.mkdir(parents=True, exist_ok=True)
        staging = self.folder(key)
        staging.mkdir(mode=0o700, parents=True, exist_ok=True)
        incoming = staging / f".incoming-{disk.name}"
        _remove(incoming)
        try:
            if source.is_dir():
                tree_copy(source, incoming, progress)
            else:
                sparse_copy(source, incoming, progress)
        except OSError as exc:
            _remove(incoming)
            raise LocalRuntimeError(f"the snapshot could not be copied: {exc}") from exc
        if incoming.is_dir():
            old = staging / f".old-{disk.name}"
            _remove(old)
            if disk.exists():
                os.replace(disk, old)
            os.replace(incoming, disk)
            _remove(old)
        else:
            os.replace(incoming, disk)

    def delete(self, key: str, name: str) -> None:
        """Remove snapshot ``name`` of ``key``; already gone is done."""
        path = self.path(key, name)
        _remove(path)
        _remove(path.with_name(path.name + ".part"))
