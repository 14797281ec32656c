"""Files in and out of a running instance, for the API: list, download, upload in resumable chunks,
delete, make a folder. The console logs in to the instance's sshd over SFTP with the instance's gateway
key (``gateway.keys``), exactly as the SSH gateway does, so it works wherever the gateway does (the
local backend, Slurm nodes) and needs nothing installed on the machine.

Uploads are resumable: ``file_write`` writes one chunk at an offset, and ``file_stat`` tells a client
that lost its connection how many bytes arrived, so it sends the rest from there.
"""

from __future__ import annotations

import posixpath
import stat
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager

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
async def _sftp(instance: Instance, target):
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
    async with conn, conn.start_sftp_client() as sftp:
        yield sftp


def _run(instance: Instance, work: Callable[[asyncssh.SFTPClient], Awaitable]):
    target = _target(instance)

    async def go():
        async with _sftp(instance, target) as sftp:
            try:
                return await work(sftp)
            except asyncssh.SFTPNoSuchFile as exc:
                raise FilesRefused(_("No such file or folder."), code="not_found", status=404) from exc
            except asyncssh.SFTPError as exc:
                raise FilesRefused(str(exc.reason), code="refused") from exc

    return async_to_sync(go)()


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


def file_read(*, instance: Instance, path: str) -> bytes:
    """A whole file (downloads are read in one go: the API caps them, see ``api.FileDownloadView``)."""

    async def work(sftp):
        async with sftp.open(path, "rb") as handle:
            return await handle.read()

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
