"""The data export: asked for on the account page, built by the worker, downloaded as a ZIP of JSON and
CSV, one at a time and a few a day, never another's, gone when it expires."""

from __future__ import annotations

import csv
import io
import json
import zipfile
from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import APIToken
from accounts.services import api_token_create
from identity.models import PhoneNumber
from instances.tests.conftest import running
from privacy import services
from privacy.errors import ExportRefused
from privacy.models import DataExport
from privacy.tests.conftest import committed
from vault.services import registry_credential_set, secret_set


def _zip(export: DataExport) -> zipfile.ZipFile:
    return zipfile.ZipFile(io.BytesIO(bytes(export.content)))


def test_an_export_holds_the_account_its_instances_and_ledger_without_secrets(rich_alice, alice_client):
    instance = running(rich_alice, name="trainer")
    _, raw = api_token_create(user=rich_alice, name="ci", expires_at=None, scope=APIToken.Scope.READ)
    PhoneNumber.objects.create(user=rich_alice, number="+8613800138000", verified_at=timezone.now())
    secret_set(owner=rich_alice, actor=rich_alice, name="WANDB_API_KEY", value="wandb-export-topsecret")
    registry_credential_set(
        owner=rich_alice, actor=rich_alice, host="registry.example.com", username="ci", password="registry-topsecret"
    )
    with committed():
        response = alice_client.post("/account/data/export/")
    assert response.status_code == 302
    export = DataExport.objects.get(user=rich_alice)
    assert export.status == DataExport.Status.READY and export.expires_at > timezone.now()

    download = alice_client.get(f"/account/data/export/{export.pk}/download/")
    assert download.status_code == 200 and download["Content-Type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(download.content))
    names = set(archive.namelist())
    assert {
        "README.txt",
        "account.json",
        "teams.json",
        "instances.csv",
        "instance_events.csv",
        "ledger_entries.csv",
        "statements.csv",
        "invoices.csv",
        "topups.csv",
        "volumes.csv",
        "deployments.csv",
    } <= names
    account = json.loads(archive.read("account.json"))
    assert account["email"] == "alice@example.com"
    assert account["identity"]["mobile_number"] == "+8613800138000"
    assert account["api_tokens"][0]["prefix"] == raw[: len(account["api_tokens"][0]["prefix"])]
    assert raw not in archive.read("account.json").decode()  # the secret never leaves
    assert [s["name"] for s in account["secrets"]] == ["WANDB_API_KEY"]  # by name: the value never leaves
    assert not any(b"wandb-export-topsecret" in archive.read(name) for name in names)
    assert [(c["registry"], c["username"]) for c in account["registry_credentials"]] == [("registry.example.com", "ci")]
    assert not any(b"registry-topsecret" in archive.read(name) for name in names)
    rows = list(csv.DictReader(io.StringIO(archive.read("instances.csv").decode("utf-8-sig"))))
    assert [(r["id"], r["name"]) for r in rows] == [(str(instance.pk), "trainer")]
    events = list(csv.DictReader(io.StringIO(archive.read("instance_events.csv").decode("utf-8-sig"))))
    assert {e["to"] for e in events} >= {"requested", "running"}
    ledger = list(csv.DictReader(io.StringIO(archive.read("ledger_entries.csv").decode("utf-8-sig"))))
    assert any(r["kind"] == "topup" and r["amount_fen"] == "1000000" for r in ledger)


def test_one_export_at_a_time_and_a_few_a_day(alice, settings):
    settings.PRIVACY_EXPORTS_PER_DAY = 2
    services.data_export_request(user=alice)  # not committed: the task has not run, so it is waiting
    with pytest.raises(ExportRefused, match="already being prepared"):
        services.data_export_request(user=alice)
    DataExport.objects.filter(user=alice).update(status=DataExport.Status.READY)
    services.data_export_request(user=alice)
    DataExport.objects.filter(user=alice).update(status=DataExport.Status.READY)
    with pytest.raises(ExportRefused, match="try again tomorrow"):
        services.data_export_request(user=alice)


def test_the_build_runs_once_however_often_its_task_does(alice):
    export = services.data_export_request(user=alice)
    assert services.data_export_build(export_id=export.pk) is True
    first = DataExport.objects.get(pk=export.pk)
    assert services.data_export_build(export_id=export.pk) is False
    assert DataExport.objects.get(pk=export.pk).sha256 == first.sha256


def test_an_export_past_the_size_limit_fails_with_a_reason(alice, settings):
    settings.PRIVACY_EXPORT_MAX_BYTES = 200
    export = services.data_export_request(user=alice)
    services.data_export_build(export_id=export.pk)
    export.refresh_from_db()
    assert export.status == DataExport.Status.FAILED and "larger" in export.error and not export.content


def test_another_users_export_and_an_expired_one_are_404(alice, alice_client, charlie_client):
    export = services.data_export_request(user=alice)
    services.data_export_build(export_id=export.pk)
    url = f"/account/data/export/{export.pk}/download/"
    assert charlie_client.get(url).status_code == 404
    assert alice_client.get(url).status_code == 200
    assert services.data_exports_expire(now=timezone.now() + timedelta(days=30)) == 1
    export.refresh_from_db()
    assert export.status == DataExport.Status.EXPIRED and export.content is None
    assert alice_client.get(url).status_code == 404


def test_the_page_lists_the_exports(alice, alice_client):
    export = services.data_export_request(user=alice)
    services.data_export_build(export_id=export.pk)
    body = alice_client.get("/account/data/").content.decode()
    assert f"/account/data/export/{export.pk}/download/" in body
    assert "Delete my account" in body
