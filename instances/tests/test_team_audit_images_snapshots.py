"""A team's audit log names who saved, shared and deleted its images and who took, restored and deleted
its snapshots, through the API in the team's context on the simulated cloud; the same operations on a
personal account write no team event, and a scheduled snapshot (the console's own) writes none."""

from __future__ import annotations

import pytest
from django.urls import reverse

from instances.models import Image, Instance, Snapshot
from instances.services import instance_stop, snapshot_create
from instances.tests.conftest import acting_client, committed, running
from instances.tests.test_team_instances import lab  # noqa: F401 (a fixture)
from teams.models import TeamEvent

pytestmark = pytest.mark.django_db

A = TeamEvent.Action


def _post(client, url, body=None):
    with committed():
        return client.post(url, body or {}, content_type="application/json")


def _audit(team, *prefixes):
    rows = TeamEvent.objects.filter(team=team).order_by("pk").values_list("action", "actor__email", "target")
    return [row for row in rows if row[0].startswith(prefixes)]


def test_a_members_image_and_snapshot_operations_are_in_the_teams_audit_log(client, lab):  # noqa: F811
    mia = lab.people["mia"]
    instance = running(lab.account, actor=mia, name="mia-run")
    api = acting_client(client, mia, lab)

    saved = _post(api, reverse("api-instance-save-image", args=[instance.pk]), {"name": "env", "tag": "v1"})
    assert saved.status_code == 202, saved.content
    image = Image.objects.get(slug=saved.json()["id"])
    assert _post(api, reverse("api-image-share", args=[image.slug]), {"shared": True}).status_code == 200
    assert _post(api, reverse("api-image-share", args=[image.slug]), {"shared": True}).status_code == 200  # no change

    taken = _post(api, reverse("api-instance-snapshots", args=[instance.pk]), {"name": "before"})
    assert taken.status_code == 202, taken.content
    snapshot = Snapshot.objects.get(slug=taken.json()["id"])
    with committed():
        instance_stop(instance=instance)
    instance.refresh_from_db()
    assert instance.status == Instance.Status.STOPPED
    assert _post(api, reverse("api-snapshot-restore", args=[snapshot.slug])).status_code == 202
    with committed():
        assert api.delete(reverse("api-snapshot-detail", args=[snapshot.slug])).status_code == 204
    released = _post(api, reverse("api-instance-release", args=[instance.pk]))  # the image is in use until then
    assert released.status_code == 200, released.content
    with committed():
        assert api.delete(reverse("api-image-detail", args=[image.slug])).status_code == 204

    assert _audit(lab, "image_", "snapshot_") == [
        (A.IMAGE_SAVED, mia.email, "env:v1"),
        (A.IMAGE_SHARED, mia.email, "env:v1"),
        (A.SNAPSHOT_TAKEN, mia.email, "before"),
        (A.SNAPSHOT_RESTORED, mia.email, "before"),
        (A.SNAPSHOT_DELETED, mia.email, "before"),
        (A.IMAGE_DELETED, mia.email, "env:v1"),
    ]
    shared = TeamEvent.objects.get(team=lab, action=A.IMAGE_SHARED)
    assert shared.details["shared"] is True and shared.details["image"] == image.slug


def test_a_scheduled_snapshot_writes_no_event(lab):  # noqa: F811
    instance = running(lab.account, actor=lab.people["mia"])
    with committed():
        snapshot_create(instance=instance, kind=Snapshot.Kind.SCHEDULED)
    assert Snapshot.objects.filter(instance=instance).count() == 1
    assert _audit(lab, "snapshot_") == []


def test_personal_image_and_snapshot_operations_write_no_team_event(rich_alice, alice_client):
    instance = running(rich_alice)
    assert (
        _post(alice_client, reverse("api-instance-save-image", args=[instance.pk]), {"name": "env"}).status_code == 202
    )
    assert _post(alice_client, reverse("api-instance-snapshots", args=[instance.pk]), {"name": "s"}).status_code == 202
    assert not TeamEvent.objects.exists()
