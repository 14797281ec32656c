"""The volumes API: the same services as the pages, the console's JSON error format on every refusal."""

from __future__ import annotations

import pytest

from instances.tests.conftest import backends, committed, running
from storage.models import Volume
from storage.tests.conftest import make_volume


def _error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == code and error["message"]
    return error


def test_create_list_resize_attach_detach_delete(rich_alice, alice_client):
    with committed():
        created = alice_client.post(
            "/api/v1/volumes/", {"name": "ckpt", "region": "cn-north-1", "size_gb": 50}, content_type="application/json"
        )
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["name"], body["region"], body["size_gb"], body["status"]) == ("ckpt", "cn-north-1", 50, "creating")
    volume_id = body["id"]
    listed = alice_client.get("/api/v1/volumes/").json()
    assert listed["count"] == 1
    assert listed["results"][0]["status"] == "available"
    assert listed["results"][0]["cost_per_day_fen"] == 50 * 2

    with committed():
        grown = alice_client.post(
            f"/api/v1/volumes/{volume_id}/resize/", {"size_gb": 80}, content_type="application/json"
        )
    assert grown.status_code == 200 and grown.json()["resize_to_gb"] == 80
    assert alice_client.get(f"/api/v1/volumes/{volume_id}/").json()["size_gb"] == 80

    instance = running(rich_alice)
    attached = alice_client.post(
        f"/api/v1/volumes/{volume_id}/attachments/",
        {"instance": str(instance.pk), "mount_path": "/mnt/ckpt/", "mode": "rw"},
        content_type="application/json",
    )
    assert attached.status_code == 201, attached.content
    assert attached.json()["mount_path"] == "/mnt/ckpt"
    assert alice_client.get(f"/api/v1/volumes/{volume_id}/attachments/").json()[0]["instance"] == str(instance.pk)

    refused = alice_client.delete(f"/api/v1/volumes/{volume_id}/")
    _error(refused, 409, "invalid_state")
    pending = alice_client.delete(f"/api/v1/volumes/{volume_id}/attachments/{attached.json()['id']}/")
    assert pending.status_code == 200 and pending.json()["detach_pending"] is True

    from instances.services import instance_stop

    with committed():
        instance_stop(instance=instance)
    with committed():
        deleted = alice_client.delete(f"/api/v1/volumes/{volume_id}/")
    assert deleted.status_code == 202 and deleted.json()["status"] == "deleting"
    assert Volume.objects.get(pk=volume_id).status == "deleted"
    assert alice_client.get("/api/v1/volumes/").json()["count"] == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"region": "cn-north-1", "size_gb": 10}, "name"),
        ({"name": "x", "region": "nowhere", "size_gb": 10}, "region"),
        ({"name": "x", "region": "cn-north-1", "size_gb": 0}, "size_gb"),
        ({"name": "x", "region": "cn-north-1", "size_gb": "big"}, "size_gb"),
    ],
)
def test_bad_creates_are_400_with_the_field(rich_alice, alice_client, body, field):
    error = _error(alice_client.post("/api/v1/volumes/", body, content_type="application/json"), 400, "invalid")
    assert field in error["fields"]
    assert not Volume.objects.exists()


def test_refusals_are_409_with_their_code(rich_alice, alice_client, settings):
    settings.STORAGE_VOLUME_QUOTA_GB = 100
    volume = make_volume(rich_alice, size_gb=100)
    over = alice_client.post(
        "/api/v1/volumes/", {"name": "more", "region": "cn-north-1", "size_gb": 1}, content_type="application/json"
    )
    _error(over, 409, "quota_exceeded")
    settings.STORAGE_VOLUME_QUOTA_GB = 1000
    shrink = alice_client.post(f"/api/v1/volumes/{volume.pk}/resize/", {"size_gb": 50}, content_type="application/json")
    assert "size_gb" in _error(shrink, 400, "invalid")["fields"]

    a, b = running(rich_alice), running(rich_alice)
    url = f"/api/v1/volumes/{volume.pk}/attachments/"
    assert (
        alice_client.post(
            url, {"instance": str(a.pk), "mount_path": "/mnt/v"}, content_type="application/json"
        ).status_code
        == 201
    )
    second = alice_client.post(url, {"instance": str(b.pk), "mount_path": "/mnt/v"}, content_type="application/json")
    _error(second, 409, "attachment_conflict")
    shared = alice_client.post(
        url, {"instance": str(b.pk), "mount_path": "/mnt/v", "mode": "shared-rw"}, content_type="application/json"
    )
    assert "mode" in _error(shared, 400, "invalid")["fields"]
    bad_path = alice_client.post(
        url, {"instance": str(b.pk), "mount_path": "/etc/../root"}, content_type="application/json"
    )
    assert "mount_path" in _error(bad_path, 400, "invalid")["fields"]
    bad_mode = alice_client.post(
        url, {"instance": str(b.pk), "mount_path": "/mnt/v", "mode": "rwx"}, content_type="application/json"
    )
    assert "mode" in _error(bad_mode, 400, "invalid")["fields"]
    not_json = alice_client.post(url, "{", content_type="application/json")
    _error(not_json, 400, "parse_error")


def test_a_region_without_volumes_is_refused(rich_alice, alice_client, settings):
    settings.PROVISIONING_BACKENDS = backends(VOLUMES=False)
    response = alice_client.post(
        "/api/v1/volumes/", {"name": "x", "region": "cn-north-1", "size_gb": 10}, content_type="application/json"
    )
    assert "region" in _error(response, 400, "invalid")["fields"]


def test_an_instance_launched_through_the_api_with_a_volume(rich_alice, alice_client):
    volume = make_volume(rich_alice)
    with committed():
        launched = alice_client.post(
            "/api/v1/instances/",
            {
                "region": "cn-north-1",
                "gpu_model": "a800-80g",
                "gpu_count": 1,
                "image": "pytorch-2.5-cu124",
                "volumes": [{"volume": str(volume.pk), "mount_path": "/models/base", "mode": "ro"}],
            },
            content_type="application/json",
        )
    assert launched.status_code == 201, launched.content
    attachment = volume.attachments.get()
    assert (str(attachment.instance_id), attachment.mount_path, attachment.mode) == (
        launched.json()["id"],
        "/models/base",
        "ro",
    )


def test_a_launch_with_someone_elses_volume_is_400(rich_alice, alice_client, charlie):
    from instances.tests.conftest import fund

    fund(charlie, 100_000)
    his = make_volume(charlie)
    response = alice_client.post(
        "/api/v1/instances/",
        {
            "region": "cn-north-1",
            "gpu_model": "a800-80g",
            "gpu_count": 1,
            "image": "pytorch-2.5-cu124",
            "volumes": [{"volume": str(his.pk), "mount_path": "/mnt/x"}],
        },
        content_type="application/json",
    )
    assert "volumes" in _error(response, 400, "invalid")["fields"]
