"""Files in and out of a running instance, for the API: list, download, upload in resumable chunks,
delete, make a folder. The console logs in to the instance's sshd over SFTP with the instance's gateway
key (``gateway.keys``), exactly as the SSH gateway does, so it works wherever the gateway does (the
local backend, Slurm nodes) and needs nothing installed on the machine.

Uploads are resumable: ``file_write`` writes one chunk at an offset, and ``file_stat`` tells a client
that lost its connection how many bytes arrived, so it sends the rest from there.

The instance is the user's, and so is whatever its disk holds. Each call runs on a web request's lane,
so it has a deadline (``GATEWAY_FILES_DEADLINE_S``): an sshd that never answers cannot hold the lane.
Only regular files are opened: a FIFO opened for reading or writing blocks until someone opens its
other end, a device may never end; ``file_read`` stops at its byte cap however large the file became
after it was checked, and spools to a temporary file rather than into memory.
"""

from __future__ import annotations

import asyncio
import posixpath
import stat
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import IO

import asyncssh
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext as _

from core.files import MAX_CHUNK, Entry, FilesRefused
from gateway import hostkeys
from instances.models import Instance
from providers import BackendError, get_backend

__all__ = ["MAX_CHUNK", "Entry", "FilesRefused"]  # the shared shapes (core.files), used here


def _target(instance: Instance):
    if not settings.GATEWAY_ENABLED:
        # The console logs in with the instance's gateway key, which machines accept only while the
        # gateway is on (``keys.instance_authorized_keys``): say so rather than fail at the login.
        raise FilesRefused(
            _("File transfers go through the SSH gateway, which is turned off on this console."), code="unavailable"
        )
    if instance.status != Instance.Status.RUNNING:
        raise FilesRefused(_("The instance's files can be reached while it runs."), code="invalid_state")
    try:
        locate = getattr(get_backend(instance.backend_alias), "ssh_target", None)
        target = locate(key=instance.key) if locate else None
    except (BackendError, ImproperlyConfigured):
        target = None
    if target is None:
        raise FilesRefused(_("This instance serves no SSH, which file transfers use."), code="unavailable")
    if target.simulated:
        raise FilesRefused(_("The simulated cloud has no files: this needs a real machine."), code="unavailable")
    return target


@asynccontextmanager
async def _sftp(instance: Instance, target, opened: list[asyncssh.SSHClientConnection]):
    """An SFTP session on the instance; its connection is appended to ``opened``, for the deadline."""
    try:
        conn = await hostkeys.instance_connect(
            instance_id=instance.pk, target=target, connect_timeout=settings.GATEWAY_CONNECT_TIMEOUT_S
        )
    except hostkeys.HostKeyChanged as exc:
        raise FilesRefused(str(exc), code="host_key_changed") from exc
    except (OSError, asyncssh.Error) as exc:
        raise FilesRefused(
            _("The instance's SSH server did not let the console in (%(error)s).") % {"error": exc}, code="unavailable"
        ) from exc
    opened.append(conn)
    async with conn, conn.start_sftp_client() as sftp:
        yield sftp


# After the deadline the connection is dropped; its clean-up gets this long before the request leaves it.
ABORT_GRACE_S = 5


def _run(instance: Instance, work: Callable[[asyncssh.SFTPClient], Awaitable]):
    target = _target(instance)
    opened: list[asyncssh.SSHClientConnection] = []

    async def go():
        async with _sftp(instance, target, opened) as sftp:
            try:
                return await work(sftp)
            except asyncssh.SFTPNoSuchFile as exc:
                raise FilesRefused(_("No such file or folder."), code="not_found", status=404) from exc
            except asyncssh.SFTPError as exc:
                raise FilesRefused(str(exc.reason), code="refused") from exc

    async def within_deadline():
        # Not asyncio.wait_for: cancelled, the session's clean-up waits for the server's answers to
        # requests it already sent, which a stalled server never gives. The connection is aborted
        # instead, which ends those requests at once.
        task = asyncio.ensure_future(go())
        done, _pending = await asyncio.wait({task}, timeout=settings.GATEWAY_FILES_DEADLINE_S)
        if task in done:
            return task.result()
        for conn in opened:
            conn.abort()
        task.cancel()
        await asyncio.wait({task}, timeout=ABORT_GRACE_S)
        raise FilesRefused(
            _("The instance did not finish this within %(seconds)d seconds.")
            % {"seconds": settings.GATEWAY_FILES_DEADLINE_S},
            code="timeout",
            status=504,
        )

    return async_to_sync(within_deadline)()


def _not_a_file() -> FilesRefused:
    return FilesRefused(_("Only regular files can be read or written here."), code="not_a_file", status=400)


async def _regular(sftp: asyncssh.SFTPClient, path: str) -> asyncssh.SFTPAttrs:
    """The attributes of ``path`` (links followed), refused unless it is a regular file: opening a FIFO
    blocks until its other end is opened, and a device's contents may never end."""
    attrs = await sftp.stat(path)
    if attrs.permissions is None or not stat.S_ISREG(attrs.permissions):
        raise _not_a_file()
    return attrs


def _kind(mode: int | None) -> str:
    if mode is None:
        return "other"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "link"
    return "other"


def _entries(names) -> list[Entry]:
    """A folder's entries, folders first, then by name."""
    entries = [
        Entry(
            name=n.filename, type=_kind(n.attrs.permissions), size=n.attrs.size or 0, modified=int(n.attrs.mtime or 0)
        )
        for n in names
        if n.filename not in (".", "..")
    ]
    return sorted(entries, key=lambda e: (e.type != "dir", e.name))


def files_list(*, instance: Instance, path: str) -> list[Entry]:
    async def work(sftp):
        names = await sftp.readdir(path or ".")
        return _entries(names)

    return _run(instance, work)


def folder_open(*, instance: Instance, path: str) -> tuple[str, list[Entry]]:
    """A folder's absolute path and its entries, in one SFTP session: the file browser opens the login's
    home folder (an empty ``path``) without knowing where it is, and shows the resolved path."""

    async def work(sftp):
        where = await sftp.realpath(path or ".")
        names = await sftp.readdir(where)
        return where, _entries(names)

    return _run(instance, work)


def file_stat(*, instance: Instance, path: str) -> Entry:
    async def work(sftp):
        attrs = await sftp.stat(path)
        return Entry(
            name=posixpath.basename(path),
            type=_kind(attrs.permissions),
            size=attrs.size or 0,
            modified=int(attrs.mtime or 0),
        )

    return _run(instance, work)


READ_BLOCK = 1024 * 1024


def file_read(*, instance: Instance, path: str, cap: int) -> IO[bytes]:
    """A regular file's bytes, in a temporary file positioned at its start (kept in memory while small).
    Refused (413) once more than ``cap`` bytes came: the size checked beforehand may not be the size
    read, as the file may grow meanwhile."""

    async def work(sftp):
        await _regular(sftp, path)
        spool = tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024)  # noqa: SIM115 (the caller closes it)
        try:
            async with sftp.open(path, "rb") as handle:
                # The same check on what was opened: the path may have been swapped since.
                opened = await handle.stat()
                if opened.permissions is None or not stat.S_ISREG(opened.permissions):
                    raise _not_a_file()
                received = 0
                while block := await handle.read(min(READ_BLOCK, cap + 1 - received)):
                    received += len(block)
                    if received > cap:
                        raise FilesRefused(
                            _("Files this large download over scp or sftp through the SSH gateway."),
                            code="too_large",
                            status=413,
                        )
                    spool.write(block)
        except BaseException:
            spool.close()
            raise
        spool.seek(0)
        return spool

    return _run(instance, work)


def file_write(*, instance: Instance, path: str, offset: int, data: bytes) -> int:
    """Write ``data`` at ``offset`` (0 starts the file afresh); the file's size after. An offset past the
    end is refused, so a resumed upload leaves no hole."""
    if len(data) > MAX_CHUNK:
        raise FilesRefused(
            _("Send at most %(mb)d MB per chunk.") % {"mb": MAX_CHUNK // 2**20}, code="too_large", status=413
        )
    if offset < 0:
        raise FilesRefused(_("The offset cannot be negative."), code="invalid", status=400)

    async def work(sftp):
        try:
            await _regular(sftp, path)
        except asyncssh.SFTPNoSuchFile:
            if offset != 0:
                raise
        if offset == 0:
            async with sftp.open(path, "wb") as handle:
                await handle.write(data)
        else:
            size = (await sftp.stat(path)).size or 0
            if offset > size:
                raise FilesRefused(
                    _("The file has %(size)d bytes; resume at that offset.") % {"size": size}, code="offset_mismatch"
                )
            async with sftp.open(path, "r+b") as handle:
                await handle.write(data, offset)
        return (await sftp.stat(path)).size or 0

    return _run(instance, work)


def file_delete(*, instance: Instance, path: str) -> None:
    async def work(sftp):
        if await sftp.isdir(path):
            await sftp.rmdir(path)  # an empty folder only: nothing recursive behind one call
        else:
            await sftp.remove(path)

    _run(instance, work)


def folder_make(*, instance: Instance, path: str) -> None:
    async def work(sftp):
        await sftp.makedirs(path, exist_ok=True)

    _run(instance, work)
