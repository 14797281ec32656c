"""Snapshots of an instance's disk, through the API on the simulated cloud: alice snapshots her instance,
restores it (only once stopped), deletes it, schedules them (retention keeps the newest) and clones the
instance from one; each snapshot is billed per GB-day and on her statement; charlie gets a 404 whatever
his credential."""

from __future__ import annotations

from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.services import api_token_create
from billing.models import Meter
from billing.settlement import meters_settle_all
from billing.statements import statement_get
from instances.models import Instance, InstanceClone, Snapshot, SnapshotSchedule
from instances.services import (
    instance_release,
    instance_start,
    instance_stop,
    snapshot_create_execute,
    snapshots_scheduled,
)
from instances.services.snapshots import snapshot_meter_ref
from instances.tests.conftest import committed, running, simulate
from providers import get_backend
from providers.simulated.models import SimulatedMachine

pytestmark = pytest.mark.django_db


def _snapshot(client, instance, **body):
    with committed():
        return client.post(
            reverse("api-instance-snapshots", args=[instance.pk]),
            {"name": "before", **body},
            content_type="application/json",
        )


def _stopped(instance):
    with committed():
        instance_stop(instance=instance)
    instance.refresh_from_db()
    assert instance.status == Instance.Status.STOPPED
    return instance


@pytest.fixture
def snapped(rich_alice, alice_client):
    instance = running(rich_alice)
    response = _snapshot(alice_client, instance)
    assert response.status_code == 202, response.content
    return instance, Snapshot.objects.get(slug=response.json()["id"])


def test_a_snapshot_of_a_running_instance_is_ready_with_its_size_and_listed(snapped, rich_alice, alice_client):
    instance, snapshot = snapped
    assert snapshot.status == Snapshot.Status.READY and snapshot.progress == 100
    assert snapshot.owner == rich_alice and snapshot.size_bytes == 2**30
    machine = SimulatedMachine.objects.get(key=str(instance.pk))
    assert snapshot.slug in machine.spec["snapshots"]
    rows = alice_client.get(reverse("api-instance-snapshots", args=[instance.pk])).json()
    assert [(r["id"], r["name"], r["status"], r["billed_gb"]) for r in rows] == [(snapshot.slug, "before", "ready", 1)]
    one = alice_client.get(reverse("api-snapshot-detail", args=[snapshot.slug])).json()
    assert one["instance"] == str(instance.pk) and one["progress"] == 100


def test_the_worker_running_twice_snapshots_once(snapped):
    _instance, snapshot = snapped
    Snapshot.objects.filter(pk=snapshot.pk).update(status=Snapshot.Status.CREATING)
    snapshot_create_execute(snapshot_id=snapshot.pk)
    snapshot_create_execute(snapshot_id=snapshot.pk)
    assert Meter.objects.filter(ref=snapshot_meter_ref(snapshot.pk)).count() == 1


def test_restore_is_refused_while_running_then_restores_the_stopped_instance(snapped, alice_client):
    instance, snapshot = snapped
    url = reverse("api-snapshot-restore", args=[snapshot.slug])
    refused = alice_client.post(url)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "invalid_state"
    assert "Stop the instance" in refused.json()["error"]["message"]
    _stopped(instance)
    with committed():
        response = alice_client.post(url)
    assert response.status_code == 202, response.content
    snapshot.refresh_from_db()
    assert snapshot.status == Snapshot.Status.READY and snapshot.restored_at is not None
    assert SimulatedMachine.objects.get(key=str(instance.pk)).spec["restored_from"] == snapshot.slug


def test_an_instance_being_restored_into_cannot_start(snapped):
    instance, snapshot = snapped
    _stopped(instance)
    Snapshot.objects.filter(pk=snapshot.pk).update(status=Snapshot.Status.RESTORING)
    from instances.errors import OperationNotAllowed

    with pytest.raises(OperationNotAllowed):
        instance_start(instance=instance)


def test_a_provider_refusal_fails_the_snapshot_and_bills_nothing(rich_alice, alice_client):
    instance = running(rich_alice)
    with simulate(FAIL_SNAPSHOT=1):
        response = _snapshot(alice_client, instance)
    snapshot = Snapshot.objects.get(slug=response.json()["id"])
    assert snapshot.status == Snapshot.Status.FAILED and "could not be snapshotted" in snapshot.status_reason
    assert not Meter.objects.filter(ref=snapshot_meter_ref(snapshot.pk)).exists()


def test_delete_stops_the_bill_and_removes_the_copy(snapped, alice_client):
    instance, snapshot = snapped
    with committed():
        assert alice_client.delete(reverse("api-snapshot-detail", args=[snapshot.slug])).status_code == 204
    snapshot.refresh_from_db()
    assert snapshot.status == Snapshot.Status.DELETED
    assert Meter.objects.get(ref=snapshot_meter_ref(snapshot.pk)).stopped_at is not None
    assert snapshot.slug not in SimulatedMachine.objects.get(key=str(instance.pk)).spec["snapshots"]
    assert alice_client.get(reverse("api-snapshot-detail", args=[snapshot.slug])).status_code == 404


def test_releasing_the_instance_deletes_its_snapshots(snapped):
    instance, snapshot = snapped
    with committed():
        instance_release(instance=instance)
    snapshot.refresh_from_db()
    assert snapshot.status == Snapshot.Status.DELETED
    assert Meter.objects.get(ref=snapshot_meter_ref(snapshot.pk)).stopped_at is not None


def test_a_released_instance_cannot_be_snapshotted(rich_alice, alice_client):
    instance = running(rich_alice)
    with committed():
        instance_release(instance=instance)
    response = _snapshot(alice_client, instance)
    assert response.status_code == 409 and response.json()["error"]["code"] == "invalid_state"


def test_it_is_billed_per_gb_day_and_on_the_statement(snapped, rich_alice, settings):
    _instance, snapshot = snapped
    meter = Meter.objects.get(ref=snapshot_meter_ref(snapshot.pk))
    assert meter.sku.code == "snapshot.gb" and meter.sku.is_storage and meter.unit_seconds == 86400
    assert meter.quantity == 1 and meter.price_fen == settings.INSTANCES_SNAPSHOT_PRICE_FEN_PER_GB_DAY
    Meter.objects.filter(pk=meter.pk).update(started_at=timezone.now() - timedelta(days=2))
    meters_settle_all()
    meter.refresh_from_db()
    assert meter.charged_fen == 2 * settings.INSTANCES_SNAPSHOT_PRICE_FEN_PER_GB_DAY
    month = timezone.localdate(timezone.now(), ZoneInfo(settings.TIME_ZONE)).replace(day=1)
    lines = {line.ref: line for line in statement_get(user=rich_alice, month=month).lines}
    line = lines[snapshot_meter_ref(snapshot.pk)]
    assert line.description.startswith("Snapshot before of ") and line.unit == "GB-day"
    assert line.amount_fen == meter.charged_fen


def test_a_provider_without_the_capability_is_a_409(rich_alice, alice_client, monkeypatch):
    instance = running(rich_alice)
    monkeypatch.setattr(type(get_backend(instance.backend_alias)), "supports_snapshots", False)
    response = _snapshot(alice_client, instance)
    assert response.status_code == 409 and response.json()["error"]["code"] == "snapshots_not_supported"
    assert not Snapshot.objects.exists()


def test_a_schedule_takes_one_per_due_tick_and_keeps_the_newest(rich_alice, alice_client):
    instance = running(rich_alice)
    url = reverse("api-instance-snapshot-schedule", args=[instance.pk])
    response = alice_client.post(url, {"every_hours": 6, "keep": 2}, content_type="application/json")
    assert response.status_code == 200, response.content
    assert response.json()["every_hours"] == 6 and response.json()["keep"] == 2
    later = timezone.now()
    for _tick in range(3):
        later += timedelta(hours=6, minutes=1)
        with committed():
            assert snapshots_scheduled(now=later)["snapshots_taken"] == 1
        with committed():
            assert snapshots_scheduled(now=later)["snapshots_taken"] == 0  # the same tick again: nothing
    kept = Snapshot.objects.filter(instance=instance, kind=Snapshot.Kind.SCHEDULED)
    assert sorted(kept.values_list("status", flat=True)) == ["deleted", "ready", "ready"]
    off = alice_client.post(url, {"every_hours": 0}, content_type="application/json")
    assert off.status_code == 200 and off.json()["every_hours"] is None
    assert not SnapshotSchedule.objects.filter(instance=instance).exists()


def test_a_bad_schedule_is_a_400(rich_alice, alice_client):
    instance = running(rich_alice)
    url = reverse("api-instance-snapshot-schedule", args=[instance.pk])
    assert alice_client.post(url, {"every_hours": 500}, content_type="application/json").status_code == 400
    assert alice_client.post(url, {"every_hours": 6, "keep": 999}, content_type="application/json").status_code == 400


def test_clone_launches_the_same_image_and_a_copy_of_the_disk(snapped, rich_alice, alice_client):
    instance, snapshot = snapped
    with committed():
        response = alice_client.post(
            reverse("api-instance-clone", args=[instance.pk]),
            {"name": "twin", "snapshot": snapshot.slug},
            content_type="application/json",
        )
    assert response.status_code == 201, response.content
    clone = Instance.objects.get(pk=response.json()["id"])
    assert clone.name == "twin" and clone.status == Instance.Status.RUNNING
    assert (clone.region, clone.gpu_model, clone.image, clone.image_ref) == (
        instance.region,
        instance.gpu_model,
        instance.image,
        instance.image_ref,
    )
    assert response.json()["hourly_price_fen"] == instance.hourly_price_fen
    assert InstanceClone.objects.get(instance=clone).snapshot == snapshot
    spec = SimulatedMachine.objects.get(key=str(clone.pk)).spec
    assert spec["cloned_from"] == {"key": str(instance.pk), "snapshot": snapshot.slug, "state": {"size_bytes": 2**30}}


def test_clone_without_a_snapshot_takes_one_first(rich_alice, alice_client):
    instance = running(rich_alice)
    with committed():
        response = alice_client.post(
            reverse("api-instance-clone", args=[instance.pk]), {}, content_type="application/json"
        )
    assert response.status_code == 201, response.content
    clone = Instance.objects.get(pk=response.json()["id"])
    assert clone.name == f"{instance.name}-clone" and clone.status == Instance.Status.RUNNING
    snapshot = InstanceClone.objects.get(instance=clone).snapshot
    assert snapshot.instance == instance and snapshot.status == Snapshot.Status.READY


def test_charlie_gets_404_on_alices_snapshots_whatever_his_credential(snapped, charlie, charlie_client, catalogue):
    instance, snapshot = snapped
    _token, raw = api_token_create(user=charlie, name="charlie", expires_at=None)
    for client in (charlie_client, Client(HTTP_AUTHORIZATION=f"Bearer {raw}")):
        assert client.get(reverse("api-snapshot-detail", args=[snapshot.slug])).status_code == 404
        assert client.post(reverse("api-snapshot-restore", args=[snapshot.slug])).status_code == 404
        assert client.delete(reverse("api-snapshot-detail", args=[snapshot.slug])).status_code == 404
        assert client.get(reverse("api-instance-snapshots", args=[instance.pk])).status_code == 404
        assert client.post(reverse("api-instance-snapshots", args=[instance.pk]), {}).status_code == 404
        assert client.post(reverse("api-instance-clone", args=[instance.pk]), {}).status_code == 404
        assert client.get(reverse("api-instance-snapshot-schedule", args=[instance.pk])).status_code == 404
    snapshot.refresh_from_db()
    assert snapshot.status == Snapshot.Status.READY
    assert Snapshot.objects.count() == 1 and Instance.objects.count() == 1
