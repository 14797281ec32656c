"""Snapshots on the instance page: take one, see it with its state and size, restore it (offered only once
the instance is stopped, with a confirmation), delete it, set a schedule, clone; a region without
snapshots says so; charlie gets a 404."""

from __future__ import annotations

import pytest
from django.urls import reverse

from instances.models import Instance, InstanceClone, Snapshot, SnapshotSchedule
from instances.services import instance_stop
from instances.tests.conftest import committed, running
from providers import get_backend

pytestmark = pytest.mark.django_db


def _page(client, instance) -> str:
    return client.get(reverse("instance_detail", args=[instance.pk])).content.decode()


def _take(client, instance, name="before"):
    with committed():
        return client.post(reverse("instance_snapshot_create", args=[instance.pk]), {"name": name})


def test_take_a_snapshot_then_restore_it_once_stopped_then_delete_it(rich_alice, alice_client):
    instance = running(rich_alice)
    page = _page(alice_client, instance)
    assert 'id="snapshots"' in page and "No snapshots yet" in page and "/home/user" in page
    assert _take(alice_client, instance).status_code == 302
    snapshot = Snapshot.objects.get(instance=instance)
    page = _page(alice_client, instance)
    assert 'data-snapshot-status="ready"' in page and "1.0\xa0GB" in page
    assert reverse("snapshot_change", args=[snapshot.slug, "restore"]) not in page  # running: not offered
    assert "Stop the instance to restore a snapshot into it." in page
    with committed():
        instance_stop(instance=instance)
    page = _page(alice_client, instance)
    restore = reverse("snapshot_change", args=[snapshot.slug, "restore"])
    assert restore in page and "what was written since it was taken is lost" in page  # the confirmation
    with committed():
        response = alice_client.post(restore)
    assert response.status_code == 302 and response["Location"].endswith("#snapshots")
    snapshot.refresh_from_db()
    assert snapshot.restored_at is not None and snapshot.status == Snapshot.Status.READY
    with committed():
        alice_client.post(reverse("snapshot_change", args=[snapshot.slug, "delete"]))
    snapshot.refresh_from_db()
    assert snapshot.status == Snapshot.Status.DELETED
    assert snapshot.slug not in _page(alice_client, instance)


def test_a_snapshot_being_made_shows_its_progress_and_refreshes(rich_alice, alice_client):
    instance = running(rich_alice)
    Snapshot.objects.create(
        slug="snap-0123456789abcdef", label="busy", instance=instance, owner=rich_alice, progress=40
    )
    page = _page(alice_client, instance)
    assert '<progress max="100" value="40"' in page and 'hx-trigger="every 2s"' in page


def test_the_schedule_form_sets_and_clears_it(rich_alice, alice_client):
    instance = running(rich_alice)
    url = reverse("instance_snapshot_schedule", args=[instance.pk])
    alice_client.post(url, {"every_hours": 12, "keep": 4})
    schedule = SnapshotSchedule.objects.get(instance=instance)
    assert (schedule.every_hours, schedule.keep) == (12, 4)
    assert "Every 12 h · keeps 4" in _page(alice_client, instance)
    alice_client.post(url, {"every_hours": 0, "keep": 1})
    assert not SnapshotSchedule.objects.filter(instance=instance).exists()


def test_clone_opens_the_new_instance(rich_alice, alice_client):
    instance = running(rich_alice)
    assert "Clone this instance" in _page(alice_client, instance)
    with committed():
        response = alice_client.post(reverse("instance_clone", args=[instance.pk]), {"name": "twin"})
    clone = Instance.objects.get(name="twin")
    assert response.status_code == 302 and response["Location"] == reverse("instance_detail", args=[clone.pk])
    assert InstanceClone.objects.get(instance=clone).snapshot.instance == instance


def test_a_region_without_snapshots_says_so(rich_alice, alice_client, monkeypatch):
    instance = running(rich_alice)
    monkeypatch.setattr(type(get_backend(instance.backend_alias)), "supports_snapshots", False)
    page = _page(alice_client, instance)
    assert 'id="snapshots-not-supported"' in page and "Take a snapshot" not in page


def test_charlie_gets_404(rich_alice, alice_client, charlie_client, catalogue):
    instance = running(rich_alice)
    _take(alice_client, instance)
    snapshot = Snapshot.objects.get(instance=instance)
    for action in ("restore", "delete"):
        assert charlie_client.post(reverse("snapshot_change", args=[snapshot.slug, action])).status_code == 404
    for name in ("instance_snapshot_create", "instance_snapshot_schedule", "instance_clone"):
        assert charlie_client.post(reverse(name, args=[instance.pk]), {"every_hours": 1, "keep": 1}).status_code == 404
    snapshot.refresh_from_db()
    assert snapshot.status == Snapshot.Status.READY and Snapshot.objects.count() == 1
