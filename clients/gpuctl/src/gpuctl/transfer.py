"""``gpuctl cp``: files to and from an instance's disk or a volume, through the console's files API.

Uploads go in chunks (``PUT …/files/content/?path=…&offset=N``) and resume: before each file the remote
size is asked (``…/files/stat/``); a file already complete is skipped, a shorter one continues at its
size (the API refuses a wrong offset, so no hole is left), a longer one starts afresh. Downloads cannot
resume inside a file (the API serves no ``Range``): a file whose local copy has the remote size is
skipped, any other is fetched whole into ``NAME.part`` and renamed when complete, so an interrupted copy
never leaves a truncated file under the real name.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from gpuctl.api import Client
from gpuctl.client import Conflict, NotFound

CHUNK = 8 * 1024 * 1024  # as the console's page sends: small enough to resume cheaply


@dataclass
class Remote:
    """One side of a copy on the console: an instance's disk or a volume, and a path there."""

    client: Client
    kind: str  # "instance" or "volume"
    id: str
    path: str

    def _op(self, what: str) -> Callable:
        return getattr(self.client, f"{self.kind}s_files_{what}")

    def stat(self, path: str) -> dict | None:
        try:
            return self._op("stat_get")(self.id, path=path)
        except NotFound:
            return None

    def listing(self, path: str) -> list[dict]:
        return self._op("list")(self.id, path=path)

    def upload(self, path: str, data: bytes, offset: int) -> dict:
        return self._op("upload")(self.id, data, path=path, offset=offset)

    def download(self, path: str) -> Iterator[bytes]:
        return self._op("download")(self.id, path=path)

    def mkdir(self, path: str) -> None:
        with contextlib.suppress(Conflict):  # already there
            self._op("mkdir")(self.id, path=path)


@dataclass
class Copied:
    path: str  # where it went
    size: int
    transferred: int  # bytes sent or received now
    outcome: str  # "copied", "resumed" (from an earlier partial upload) or "skipped" (already complete)


Progress = Callable[[str, int, int], None]  # (name, bytes done now, file size)


def _local_files(source: Path) -> Iterator[tuple[Path, str]]:
    """(file, its path relative to ``source``'s parent): a file alone, or a folder's files."""
    if source.is_file():
        yield source, source.name
        return
    for folder, dirs, files in os.walk(source):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder) / name
            yield path, str(path.relative_to(source.parent))


def upload(source: Path, remote: Remote, *, recursive: bool, force: bool, progress: Progress) -> list[Copied]:
    """``source`` (a file, or with ``recursive`` a folder) into ``remote.path``: into it when it is a
    folder there (or ends with /), else as that name."""
    if source.is_dir() and not recursive:
        raise IsADirectoryError(f"{source} is a folder: add -r")
    target = remote.path or "."
    there = remote.stat(target) if not target.endswith("/") else {"type": "dir"}
    into_folder = (there or {}).get("type") == "dir" or (source.is_dir() and there is None)
    # As cp -r: a folder copied to a new name becomes it; to a folder that exists, goes inside it.
    strip = source.is_dir() and there is None
    if strip:
        remote.mkdir(target.rstrip("/"))
    done = []
    made: set[str] = set()
    for file, relative in _local_files(source):
        if into_folder:
            if strip:
                relative = posixpath.join(*Path(relative).parts[1:])
            destination = posixpath.join(target, *Path(relative).parts)
        else:
            destination = target
        folder = posixpath.dirname(destination)
        if source.is_dir() and folder and folder not in made and folder != target.rstrip("/"):
            for parent in _parents(folder, target.rstrip("/")):
                if parent not in made:
                    remote.mkdir(parent)
                    made.add(parent)
        done.append(_upload_one(file, remote, destination, force=force, progress=progress))
    return done


def _parents(folder: str, root: str) -> list[str]:
    out = []
    while folder and folder != root and folder not in ("/", "."):
        out.append(folder)
        folder = posixpath.dirname(folder)
    return list(reversed(out))


def _upload_one(file: Path, remote: Remote, destination: str, *, force: bool, progress: Progress) -> Copied:
    size = file.stat().st_size
    there = None if force else remote.stat(destination)
    offset = there["size"] if there and there.get("type") == "file" and there["size"] <= size else 0
    if there and offset == size and size > 0:
        progress(destination, size, size)
        return Copied(destination, size, 0, "skipped")
    outcome = "resumed" if offset else "copied"
    with file.open("rb") as handle:
        handle.seek(offset)
        position = offset
        progress(destination, position, size)
        while True:
            data = handle.read(CHUNK)
            if not data and position > 0:
                break
            answer = remote.upload(destination, data, position)
            position = answer["size"]
            progress(destination, position, size)
            if not data:
                break
    return Copied(destination, size, size - offset, outcome)


def download(remote: Remote, target: Path, *, recursive: bool, force: bool, progress: Progress) -> list[Copied]:
    """``remote.path`` (a file, or with ``recursive`` a folder) to ``target``: into it when it is a
    local folder, else as that name."""
    entry = remote.stat(remote.path)
    if entry is None:
        raise NotFound(404, "not_found", f"{remote.path}: no such file")
    name = posixpath.basename(remote.path.rstrip("/")) or "root"
    if entry["type"] == "dir":
        if not recursive:
            raise IsADirectoryError(f"{remote.path} is a folder: add -r")
        root = target / name if target.is_dir() else target
        return _download_tree(remote, remote.path.rstrip("/") or "/", root, force=force, progress=progress)
    destination = target / name if target.is_dir() else target
    return [_download_one(remote, remote.path, entry, destination, force=force, progress=progress)]


def _download_tree(remote: Remote, path: str, root: Path, *, force: bool, progress: Progress) -> list[Copied]:
    root.mkdir(parents=True, exist_ok=True)
    done = []
    for entry in sorted(remote.listing(path), key=lambda e: e["name"]):
        child = posixpath.join(path, entry["name"])
        if entry["type"] == "dir":
            done += _download_tree(remote, child, root / entry["name"], force=force, progress=progress)
        elif entry["type"] == "file":
            done.append(_download_one(remote, child, entry, root / entry["name"], force=force, progress=progress))
    return done


def _download_one(remote: Remote, path: str, entry: dict, destination: Path, *, force: bool, progress) -> Copied:
    size = entry["size"]
    if not force and destination.is_file() and destination.stat().st_size == size:
        progress(str(destination), size, size)
        return Copied(str(destination), size, 0, "skipped")
    partial = destination.with_name(destination.name + ".part")
    received = 0
    progress(str(destination), 0, size)
    with partial.open("wb") as handle:
        for data in remote.download(path):
            handle.write(data)
            received += len(data)
            progress(str(destination), received, size)
    partial.replace(destination)
    return Copied(str(destination), received, received, "copied")


def as_json(rows: list[Copied]) -> list[dict]:
    return [asdict(row) for row in rows]
