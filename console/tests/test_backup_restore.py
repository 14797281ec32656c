"""The restore drill: a backup taken while the console has money and machines in flight loads into an
empty database, the books balance there, and a restore never goes over a database in use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from billing.models import Transaction
from console.backup import BackupError, backup_write, restore_read
from instances.catalogue import catalogue_seed
from instances.models import Instance
from instances.tests.conftest import fund, running

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def empty_database():
    """A new, empty database on the test server, dropped afterwards; yields its URL."""
    params = connection.get_connection_params()
    admin = psycopg.connect(
        host=params.get("host"),
        port=params.get("port"),
        user=params.get("user"),
        password=params.get("password"),
        dbname="postgres",
        autocommit=True,
    )
    name = f"restore_drill_{uuid.uuid4().hex[:8]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    user = params.get("user") or ""
    password = params.get("password") or ""
    auth = f"{user}:{password}@" if password else f"{user}@" if user else ""
    try:
        yield f"postgres://{auth}{params.get('host') or '127.0.0.1'}:{params.get('port') or 5432}/{name}"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def manage(url: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CONSOLE_ENV": "test", "DATABASE_URL": url}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def test_a_backup_restores_into_an_empty_database_with_balanced_books(alice, bob, tmp_path, empty_database):
    catalogue_seed()
    fund(alice, 500_000)
    fund(bob, 20_000)
    instance = running(alice)
    assert instance.status == Instance.Status.RUNNING

    folder = backup_write(into=tmp_path)

    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["counts"]["instances_running"] == 1
    assert manifest["counts"]["ledger_transactions"] == Transaction.objects.count()
    assert oct((folder).stat().st_mode & 0o777) == "0o700"  # a dump holds every customer's data

    restored = manage(empty_database, "restore", str(folder))
    assert restored.returncode == 0, restored.stderr
    assert "ledger OK" in restored.stdout
    with psycopg.connect(empty_database.replace("postgres://", "postgresql://")) as conn:
        status = conn.execute("SELECT status FROM instances_instance WHERE id = %s", [instance.pk]).fetchone()
        transactions = conn.execute("SELECT count(*) FROM billing_transaction").fetchone()[0]
    assert status == ("running",)
    assert transactions == Transaction.objects.count()


def test_a_restore_never_goes_over_a_database_in_use(alice, tmp_path):
    folder = backup_write(into=tmp_path)

    with pytest.raises(BackupError, match="not empty"):
        restore_read(folder=folder)


def test_a_dump_that_is_not_the_one_its_manifest_describes_is_refused(alice, tmp_path, empty_database):
    folder = backup_write(into=tmp_path)
    with (folder / "database.dump").open("ab") as dump:
        dump.write(b"tampered")

    refused = manage(empty_database, "restore", str(folder))

    assert refused.returncode != 0
    assert "SHA-256" in refused.stderr
