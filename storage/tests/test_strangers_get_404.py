"""charlie gets a 404 on every page and endpoint of alice's volume, and changes nothing; he cannot attach
her volume to his instance nor his volume to her instance."""

from __future__ import annotations

import pytest
from django.urls import reverse

from instances.tests.conftest import fund, running
from storage.models import Volume, VolumeAttachment
from storage.tests.conftest import make_volume


@pytest.fixture
def alices(rich_alice):
    volume = make_volume(rich_alice, name="alices")
    instance = running(rich_alice)
    from storage.services import volume_attach

    attachment = volume_attach(user=rich_alice, volume=volume, instance=instance, mount_path="/mnt/a", mode="rw")
    return volume, attachment


def _unchanged(volume, attachment):
    volume.refresh_from_db()
    assert (volume.status, volume.size_gb) == (Volume.Status.AVAILABLE, 100)
    assert VolumeAttachment.objects.filter(pk=attachment.pk, detach_requested_at__isnull=True).exists()
    assert VolumeAttachment.objects.count() == 1


@pytest.mark.parametrize(
    ("method", "name", "extra"),
    [
        ("get", "volume_detail", {}),
        ("get", "volume_detail", {"partial": "row"}),
        ("post", "volume_resize", {"size_gb": 500}),
        ("post", "volume_delete", {}),
        ("post", "volume_attach", {"mount_path": "/mnt/x", "mode": "ro"}),
    ],
)
def test_charlie_gets_404_on_alices_pages(alices, charlie_client, method, name, extra):
    volume, attachment = alices
    response = getattr(charlie_client, method)(reverse(name, args=[volume.pk]), extra)
    assert response.status_code == 404
    _unchanged(volume, attachment)


def test_charlie_gets_404_detaching_alices_attachment(alices, charlie_client):
    volume, attachment = alices
    response = charlie_client.post(reverse("volume_detach", args=[volume.pk, attachment.pk]))
    assert response.status_code == 404
    _unchanged(volume, attachment)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("get", "", None),
        ("delete", "", None),
        ("post", "resize/", {"size_gb": 500}),
        ("get", "attachments/", None),
        ("post", "attachments/", {"instance": "00000000-0000-0000-0000-000000000000", "mount_path": "/mnt/x"}),
        ("delete", "attachments/{attachment}/", None),
    ],
)
def test_charlie_gets_404_on_alices_endpoints(alices, charlie_client, method, path, body):
    volume, attachment = alices
    url = f"/api/v1/volumes/{volume.pk}/" + path.format(attachment=attachment.pk)
    response = getattr(charlie_client, method)(url, body, content_type="application/json")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    _unchanged(volume, attachment)


def test_charlie_does_not_see_alices_volume_in_lists(alices, charlie_client):
    assert charlie_client.get("/api/v1/volumes/").json()["count"] == 0
    assert b"alices" not in charlie_client.get(reverse("storage")).content


def test_charlie_cannot_attach_his_volume_to_alices_instance(alices, charlie, charlie_client):
    _volume, attachment = alices
    fund(charlie, 100_000)
    his = make_volume(charlie, name="his")
    response = charlie_client.post(
        f"/api/v1/volumes/{his.pk}/attachments/",
        {"instance": str(attachment.instance_id), "mount_path": "/mnt/x"},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "instance" in response.json()["error"]["fields"]
    page = charlie_client.post(
        reverse("volume_attach", args=[his.pk]),
        {"instance": attachment.instance_id, "mount_path": "/mnt/x", "mode": "rw"},
    )
    assert page.status_code == 302
    assert not his.attachments.exists()
