"""The restore drill: a backup taken while the console has money and machines in flight loads into an
empty database, the books balance there, and a restore never goes over a database in use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from contextlib import contextmanager
from urllib.parse import urlparse

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from billing.models import Meter, Transaction
from billing.services import ledger_check
from console.backup import BackupError, backup_write, restore_read
from instances.catalogue import catalogue_seed
from instances.models import Instance, StrayMachine
from instances.reconciler import instances_reconcile
from instances.services import instance_release
from instances.skus import gpu_meter_ref
from instances.tests.conftest import (
    committed,
    fund,
    launch,
    running,
    this_host,  # noqa: F401 (a fixture: the local backend)
)
from instances.usage_audit import usage_audit
from providers.local.tests.local_helpers import wait_running

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


@contextmanager
def on_database(url: str):
    """Run this process's ORM against the database at ``url`` for a block, as a console started on a
    restored database would (its reconciler, its checks)."""
    name = urlparse(url).path.lstrip("/")
    original = connection.settings_dict["NAME"]
    connection.close()
    connection.settings_dict["NAME"] = name
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict["NAME"] = original


def _gpu_meters(instance_pk) -> list[tuple]:
    return list(
        Meter.objects.filter(ref=gpu_meter_ref(instance_pk))
        .order_by("started_at")
        .values_list("started_at", "stopped_at")
    )


@pytest.mark.local
def test_a_restored_console_adopts_the_machines_still_running_and_bills_no_second_twice(
    this_host,  # noqa: F811 (the fixture imported above)
    alice,
    tmp_path,
    empty_database,
):
    """The drill on machines that live outside the database (this host's servers): backed up with two
    running, then one released and another launched before the restore. The restored console keeps
    the one still running on its meter of before the dump (no second meter, no gap), finds the released
    one gone and stops billing it, lists the newer machine for staff without touching it, and its books
    and meters agree."""
    backend = this_host(services=("lab",))
    fund(alice, 500_000)
    with committed():
        kept = launch(alice, gpu="h200", region="local", name="kept")
        gone = launch(alice, gpu="h200", region="local", name="released-after-the-dump")
    wait_running(kept)
    wait_running(gone)
    kept_meters = _gpu_meters(kept.pk)
    assert len(kept_meters) == 1 and kept_meters[0][1] is None

    folder = backup_write(into=tmp_path / "backups")
    with committed():
        instance_release(instance=Instance.objects.get(pk=gone.pk))
    assert gone.key not in backend.runtime.instance_keys()
    with committed():
        newer = launch(alice, gpu="h200", region="local", name="launched-after-the-dump")
    wait_running(newer)

    restored = manage(empty_database, "restore", str(folder))
    assert restored.returncode == 0, restored.stderr
    with on_database(empty_database):
        assert not Instance.objects.filter(pk=newer.pk).exists()
        instances_reconcile()
        instances_reconcile()  # a second pass changes nothing: adoption is settled

        assert Instance.objects.get(pk=kept.pk).status == Instance.Status.RUNNING
        assert _gpu_meters(kept.pk) == kept_meters  # the same open meter: its seconds counted once
        lost = Instance.objects.get(pk=gone.pk)
        assert lost.status == Instance.Status.LOST, lost.status_reason_text
        assert all(stopped is not None for _started, stopped in _gpu_meters(gone.pk))
        stray = StrayMachine.objects.get(backend_alias="local", key=newer.key)
        assert stray.resolved_at is None
        assert ledger_check().ok
        audit = usage_audit(instances=Instance.objects.all())
        assert audit.problems == [], audit.problems
    # Nothing the restored console did touched the newer machine: staff decide what a stray is.
    assert newer.key in backend.runtime.instance_keys()
    assert {kept.key, newer.key} <= set(backend.runtime.instance_keys())
