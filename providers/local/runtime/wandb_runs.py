"""The W&B runs an instance started, read off its disk: the console's Python hook in the container
(``images/contract/python/sitecustomize.py``) appends each run's address to
``~/.cache/console/wandb-runs.jsonl``, and the instance page links the newest.

The file is the tenant's: written by their programs, on a disk they own. It is read as data only, and
carefully: each folder on the way and the file itself are opened without following symbolic links (a
link to a host file is refused, not read), only a regular file is read (a FIFO would block the web
thread), only its last ``TAIL_BYTES``, and only entries whose address is an ``https`` URL are kept.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path
from urllib.parse import urlsplit

RUNS_FILE = (".cache", "console", "wandb-runs.jsonl")
TAIL_BYTES = 16 * 1024
FIELDS = ("name", "project", "entity", "id")


def _open_beneath(home: Path, parts: tuple[str, ...]) -> int | None:
    """A read-only descriptor of ``home/parts…``, refusing a symbolic link anywhere below ``home``;
    None when something is missing or is not what it should be."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(home, flags | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            child = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        leaf = os.open(parts[-1], flags | os.O_NONBLOCK, dir_fd=fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    if not stat.S_ISREG(os.fstat(leaf).st_mode):
        os.close(leaf)
        return None
    return leaf


def _entry(line: str) -> dict | None:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        return None
    url = data["url"].strip()
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname or len(url) > 500 or any(c.isspace() for c in url):
        return None
    entry = {"url": url, "host": parts.hostname}
    for field in FIELDS:
        value = data.get(field)
        entry[field] = str(value)[:200] if isinstance(value, str | int) else ""
    at = data.get("at")
    entry["at"] = int(at) if isinstance(at, int) and not isinstance(at, bool) and at > 0 else None
    return entry


def wandb_runs_read(home: Path, *, limit: int = 5) -> list[dict]:
    """The newest ``limit`` runs recorded on the disk mounted at ``home``, newest first, one per
    address: ``{"url", "host", "name", "project", "entity", "id", "at"}`` (``at``: epoch seconds or None)."""
    fd = _open_beneath(home, RUNS_FILE)
    if fd is None:
        return []
    with os.fdopen(fd, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        with contextlib.suppress(OSError):
            handle.seek(max(0, size - TAIL_BYTES))
        tail = handle.read(TAIL_BYTES)
    lines = tail.decode("utf-8", errors="replace").splitlines()
    if size > TAIL_BYTES and lines:
        lines = lines[1:]  # the first is likely cut
    runs, seen = [], set()
    for line in reversed(lines):
        entry = _entry(line)
        if entry is None or entry["url"] in seen:
            continue
        seen.add(entry["url"])
        runs.append(entry)
        if len(runs) == limit:
            break
    return runs
