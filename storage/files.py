"""Files on a volume: list, stat, download (streamed), upload in resumable chunks within the volume's
size, delete, make a folder. The shapes and the chunk protocol are the instance file browser's
(``core.files``, ``gateway.files``).

Where the files are is the provider's answer (``volume_files_dir``): a directory on this host for the
local backend (``<runtime root>/volumes/<key>``) and the simulated cloud (``VOLUMES_DIR``). A volume
elsewhere (a Kubernetes claim) has none here: its files are reached through a running instance that
mounts it (the instance's own file browser), and ``volume_browse_elsewhere`` says which.

Confinement: a path is a volume path (``/runs/a.bin``, ``/`` its root); ``..`` is refused, and every
component is opened relative to its parent's descriptor with ``O_NOFOLLOW``, so a symbolic link in the
volume (an instance may write one pointing anywhere) is never followed, even if it replaces a folder
between two calls. Links are listed, and may be deleted, but not opened.

The quota: a chunk that would take the volume's files past its size is refused (``volume_full``)
before a byte is written, counting what the volume's files take now, under the volume's row lock so
two uploads at once cannot both pass the check.

Limits, as the instance file browser's (``gateway.files``): whatever an instance wrote on the volume
must not hold a web request's lane. Only regular files are opened, and the check is made on what was
opened (``O_NONBLOCK``, then ``fstat``), since a FIFO opened for reading or writing blocks until its
other end is opened and a device may never end. Each call that walks folders has a deadline
(``STORAGE_FILES_DEADLINE_S``), so a volume of millions of files answers 504 instead of holding the
lane. A download streams at most the bytes the file had when it was opened, and a file larger than the
volume itself (a sparse file) is refused: an instance appending to a file, or a hole of a terabyte,
cannot make a download that never ends.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.template.defaultfilters import filesizeformat
from django.utils import timezone
from django.utils.translation import gettext as _

from core.files import MAX_CHUNK, Entry, FilesRefused
from instances.models import Instance
from providers import BackendError, get_backend
from storage.models import Volume, VolumeAttachment

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
PIECE = 1024 * 1024  # how much of a chunk's body is read and written at a time


class Deadline:
    """When a call must give up (``STORAGE_FILES_DEADLINE_S`` from its start): ``check()`` is a 504."""

    def __init__(self) -> None:
        self.seconds = settings.STORAGE_FILES_DEADLINE_S
        self.at = time.monotonic() + self.seconds

    def check(self) -> None:
        if time.monotonic() > self.at:
            raise FilesRefused(
                _("The volume's files took longer than %(seconds)d seconds to go through; try a smaller folder.")
                % {"seconds": self.seconds},
                code="timeout",
                status=504,
            )


def _not_a_file() -> FilesRefused:
    return FilesRefused(_("Only regular files can be read or written here."), code="not_a_file", status=400)


# --- Paths ---------------------------------------------------------------------------------------------


def volume_path_clean(path: str) -> tuple[str, ...]:
    """A volume path's components (``()`` for the root), or a 400 saying why it cannot be one."""
    path = (path or "").strip()
    if "\x00" in path:
        raise FilesRefused(_("A path cannot hold a NUL character."), code="invalid_path", status=400)
    parts = tuple(p for p in path.split("/") if p and p != ".")
    if ".." in parts:
        raise FilesRefused(
            _("A path cannot go up with “..”: it stays inside the volume."), code="invalid_path", status=400
        )
    if any(len(p.encode()) > 255 for p in parts):
        raise FilesRefused(_("A name can be 255 bytes at most."), code="invalid_path", status=400)
    return parts


def volume_path_text(parts: tuple[str, ...]) -> str:
    return "/" + "/".join(parts)


def _root(volume: Volume) -> Path:
    """The volume's directory on this host, or a refusal saying why its files cannot be reached here."""
    if volume.status not in Volume.MOUNTABLE:
        raise FilesRefused(
            _("The volume's files can be reached while it is available; it is %(status)s.")
            % {"status": volume.get_status_display().lower()},
            code="invalid_state",
        )
    try:
        backend = get_backend(volume.backend_alias)
        locate = getattr(backend, "volume_files_dir", None)
        root = locate(key=volume.key, state=volume.backend_state) if locate else None
    except (BackendError, ImproperlyConfigured):
        root = None
    if root is None:
        raise FilesRefused(
            _("This region keeps its volumes' files on its own storage, out of the console's reach."),
            code="unavailable",
        )
    return Path(root)


def _refusal(exc: OSError) -> FilesRefused:
    """An OS error as the refusal a person reads."""
    if exc.errno == errno.ENOENT:
        return FilesRefused(_("No such file or folder."), code="not_found", status=404)
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        return FilesRefused(
            _("The path goes through a link; links on a volume are not followed here."), code="link", status=400
        )
    if exc.errno == errno.ENOTDIR:
        return FilesRefused(_("Part of the path is a file, not a folder."), code="not_a_folder", status=400)
    if exc.errno == errno.EISDIR:
        return FilesRefused(_("That is a folder, not a file."), code="is_a_folder", status=400)
    if exc.errno == errno.EEXIST:
        return FilesRefused(_("A file of that name is already there."), code="exists")
    if exc.errno == errno.ENOTEMPTY:
        return FilesRefused(_("The folder is not empty: delete what is in it first."), code="not_empty")
    if exc.errno == errno.ENOSPC:
        return FilesRefused(_("The disk holding the volume is full."), code="volume_full", status=413)
    return FilesRefused(_("The file could not be reached (%(error)s).") % {"error": exc.strerror}, code="refused")


@contextlib.contextmanager
def _folder(root: Path, parts: tuple[str, ...], *, make: bool = False) -> Iterator[int]:
    """A descriptor of the folder ``parts`` under ``root``, opened one component at a time without
    following links (``make``: folders that are missing are made)."""
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        raise FilesRefused(_("The volume's folder is missing on this host."), code="unavailable") from exc
    try:
        for part in parts:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not make:
                    raise
                with contextlib.suppress(FileExistsError):  # made at the same moment by another request
                    os.mkdir(part, 0o755, dir_fd=fd)
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except OSError as exc:
        os.close(fd)
        raise _refusal(exc) from exc
    try:
        yield fd
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "link"
    return "other"


def _entry(name: str, st: os.stat_result) -> Entry:
    kind = _kind(st.st_mode)
    return Entry(name=name, type=kind, size=st.st_size if kind == "file" else 0, modified=int(st.st_mtime))


def _usage(root: Path, deadline: Deadline | None = None) -> int:
    """Bytes the volume's regular files hold (apparent sizes; links and what they point at count nothing)."""
    total = 0
    deadline = deadline or Deadline()
    with _folder(root, ()) as fd:
        for _top, _dirs, names, dir_fd in os.fwalk(".", dir_fd=fd, follow_symlinks=False):
            deadline.check()
            for name in names:
                try:
                    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue  # deleted while counting
                if stat.S_ISREG(st.st_mode):
                    total += st.st_size
    return total


def _usage_record(volume: Volume, used: int) -> None:
    """What the browser just measured is the volume's usage until the next periodic refresh."""
    now = timezone.now()
    Volume.objects.filter(pk=volume.pk).update(used_bytes=used, usage_checked_at=now)
    volume.used_bytes, volume.usage_checked_at = used, now


# --- Reads ---------------------------------------------------------------------------------------------


def volume_files_list(*, volume: Volume, path: str) -> tuple[str, list[Entry]]:
    """A folder's volume path and its entries, folders first, then by name."""
    parts = volume_path_clean(path)
    root = _root(volume)
    deadline = Deadline()
    with _folder(root, parts) as fd:
        entries = []
        try:
            for n, item in enumerate(os.scandir(fd)):
                if not n % 1024:
                    deadline.check()
                try:
                    entries.append(_entry(item.name, item.stat(follow_symlinks=False)))
                except FileNotFoundError:
                    continue
        except OSError as exc:
            raise _refusal(exc) from exc
    return volume_path_text(parts), sorted(entries, key=lambda e: (e.type != "dir", e.name))


def volume_file_stat(*, volume: Volume, path: str) -> Entry:
    """One entry (a file's size says where an upload resumes); the root is a folder."""
    parts = volume_path_clean(path)
    root = _root(volume)
    if not parts:
        return Entry(name="/", type="dir", size=0, modified=int(root.stat().st_mtime))
    with _folder(root, parts[:-1]) as fd:
        try:
            return _entry(parts[-1], os.stat(parts[-1], dir_fd=fd, follow_symlinks=False))
        except OSError as exc:
            raise _refusal(exc) from exc


class CappedReader:
    """A file's first ``cap`` bytes, then its end, however the file grows meanwhile; closed by whoever
    streams it (``FileResponse``)."""

    def __init__(self, handle, cap: int) -> None:
        self.handle, self.left = handle, cap

    def read(self, size: int = -1) -> bytes:
        if self.left <= 0:
            return b""
        block = self.handle.read(self.left if size is None or size < 0 else min(size, self.left))
        self.left -= len(block)
        return block

    def close(self) -> None:
        self.handle.close()


def volume_file_open(*, volume: Volume, path: str) -> tuple[CappedReader, Entry]:
    """A regular file opened for reading and its entry: the reader stops at the size the file had when
    opened (the caller streams and closes it). A link, a folder, a FIFO or a device is refused, and so
    is a file larger than the volume (a sparse one: its holes would stream as zeros without end)."""
    parts = volume_path_clean(path)
    if not parts:
        raise FilesRefused(_("Only a file can be downloaded."), code="invalid", status=400)
    root = _root(volume)
    with _folder(root, parts[:-1]) as fd:
        try:
            # O_NONBLOCK: opening a FIFO does not wait for a writer; what was opened is checked below.
            handle = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=fd)
        except OSError as exc:
            raise _refusal(exc) from exc
    st = os.fstat(handle)
    if stat.S_ISDIR(st.st_mode):
        os.close(handle)
        raise FilesRefused(_("Only a file can be downloaded."), code="invalid", status=400)
    if not stat.S_ISREG(st.st_mode):
        os.close(handle)
        raise _not_a_file()
    if st.st_size > volume.size_bytes:
        os.close(handle)
        raise FilesRefused(
            _("This file is larger than the volume itself (a sparse file): it cannot be downloaded here."),
            code="too_large",
            status=413,
        )
    os.set_blocking(handle, True)
    return CappedReader(os.fdopen(handle, "rb"), st.st_size), _entry(parts[-1], st)


def volume_browse_elsewhere(*, volume: Volume) -> list[VolumeAttachment]:
    """Running instances that mount the volume now, for a volume whose files are not on this host:
    their own file browser reaches the files at the mount path."""
    return list(
        VolumeAttachment.objects.filter(volume=volume, instance__status=Instance.Status.RUNNING)
        .select_related("instance")
        .order_by("created_at", "id")
    )


# --- Writes --------------------------------------------------------------------------------------------


def _full(volume: Volume, *, used: int, growth: int) -> FilesRefused:
    free = max(volume.size_bytes - used, 0)
    return FilesRefused(
        _(
            "%(name)s is full for this: it holds %(size)d GB and %(free)s are free, but the chunk adds "
            "%(growth)s. Delete files or grow the volume, then resume."
        )
        % {"name": volume.name, "size": volume.size_gb, "free": filesizeformat(free), "growth": filesizeformat(growth)},
        code="volume_full",
        status=413,
    )


def volume_file_write(*, volume: Volume, path: str, offset: int, length: int, body: Iterable[bytes]) -> int:
    """Write a chunk of ``length`` bytes (read from ``body``) at ``offset`` of a file (0 starts it afresh);
    returns the file's size after. Refused before any byte is written: an offset past the file's end
    (``offset_mismatch``, so no hole is left), or a chunk that would take the volume past its size
    (``volume_full``). Missing folders on the way are made.

    A body that ends early (the client's connection dropped) leaves what arrived written: the file's
    size, from ``volume_file_stat``, is where the client resumes.
    """
    if length > MAX_CHUNK:
        raise FilesRefused(
            _("Send at most %(mb)d MB per chunk.") % {"mb": MAX_CHUNK // 2**20}, code="too_large", status=413
        )
    if offset < 0 or length < 0:
        raise FilesRefused(_("The offset cannot be negative."), code="invalid", status=400)
    parts = volume_path_clean(path)
    if not parts:
        raise FilesRefused(_("Name the file to write."), code="invalid_path", status=400)
    root = _root(volume)
    with transaction.atomic():
        # One writer per volume at a time: the quota check and the write are one step.
        locked = Volume.objects.select_for_update().get(pk=volume.pk)
        if locked.status not in Volume.MOUNTABLE:
            raise FilesRefused(_("The volume is no longer available."), code="invalid_state")
        with _folder(root, parts[:-1], make=True) as fd:
            name = parts[-1]
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            except OSError as exc:
                raise _refusal(exc) from exc
            if st is not None and not stat.S_ISREG(st.st_mode):
                kind = _kind(st.st_mode)
                if kind == "other":
                    raise _not_a_file()
                raise _refusal(OSError(errno.EISDIR if kind == "dir" else errno.ELOOP, kind))
            current = st.st_size if st is not None else 0
            if offset > current or (offset and st is None):
                raise FilesRefused(
                    _("The file has %(size)d bytes; resume at that offset.") % {"size": current},
                    code="offset_mismatch",
                )
            after = length if offset == 0 else max(current, offset + length)
            growth = after - current
            used = _usage(root)
            if growth > 0 and used + growth > locked.size_bytes:
                raise _full(locked, used=used, growth=growth)
            # O_NONBLOCK: a FIFO swapped in since the stat above does not wait for a reader (ENXIO), and
            # whatever was opened is checked before a byte is written or the file is truncated.
            flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
            try:
                handle = os.open(name, flags, 0o644, dir_fd=fd)
            except OSError as exc:
                if exc.errno == errno.ENXIO:
                    raise _not_a_file() from exc
                raise _refusal(exc) from exc
            try:
                if not stat.S_ISREG(os.fstat(handle).st_mode):
                    raise _not_a_file()
                os.set_blocking(handle, True)
                if offset == 0:
                    os.ftruncate(handle, 0)
                os.lseek(handle, offset, os.SEEK_SET)
                left = length
                for piece in body:
                    piece = piece[:left]
                    view = memoryview(piece)
                    while view:
                        view = view[os.write(handle, view) :]
                    left -= len(piece)
                    if not left:
                        break
                size = os.fstat(handle).st_size
            except OSError as exc:
                raise _refusal(exc) from exc
            finally:
                os.close(handle)
        _usage_record(volume, used + size - current)
    return size


def volume_file_delete(*, volume: Volume, path: str) -> None:
    """Delete a file, a link (not what it points at) or an empty folder; never the volume's root."""
    parts = volume_path_clean(path)
    if not parts:
        raise FilesRefused(_("The volume's root cannot be deleted: delete the volume instead."), code="invalid")
    root = _root(volume)
    with _folder(root, parts[:-1]) as fd:
        try:
            st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                os.rmdir(parts[-1], dir_fd=fd)  # an empty folder only: nothing recursive behind one call
            else:
                os.unlink(parts[-1], dir_fd=fd)
        except OSError as exc:
            raise _refusal(exc) from exc
    _usage_record(volume, _usage(root))


def volume_folder_make(*, volume: Volume, path: str) -> str:
    """Make a folder and its parents (already there is fine); its volume path."""
    parts = volume_path_clean(path)
    root = _root(volume)
    with _folder(root, parts, make=True):
        pass
    return volume_path_text(parts)


def body_pieces(stream, *, length: int) -> Iterator[bytes]:
    """A request body's bytes in pieces of ``PIECE``, ``length`` at most; ends early if the client left."""
    left = length
    while left > 0:
        piece = stream.read(min(PIECE, left))
        if not piece:
            return
        left -= len(piece)
        yield piece
