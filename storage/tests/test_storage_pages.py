"""The storage pages: list with usage and cost, create, resize, attach, detach, delete (htmx rows), the
launch form's volumes and the instance page's mounts."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from instances.models import GpuModel, Image, Instance, Region
from instances.tests.conftest import backends, committed, running
from providers import get_backend
from storage import services
from storage.models import Volume
from storage.tests.conftest import make_volume


def test_the_nav_entry_opens_the_storage_page_with_what_to_do_next(rich_alice, alice_client):
    body = alice_client.get("/storage/").content.decode()
    assert "coming soon" not in body
    assert "No volumes yet" in body
    assert 'id="create-volume"' in body


def test_create_from_the_form_and_see_size_usage_and_cost(rich_alice, alice_client):
    with committed():
        response = alice_client.post(reverse("storage"), {"name": "datasets", "region": 0, "size_gb": 200})
    assert response.status_code == 200  # region 0 is no choice: the form says so
    region = Region.objects.get(slug="cn-north-1")
    with committed():
        response = alice_client.post(reverse("storage"), {"name": "datasets", "region": region.pk, "size_gb": 200})
    assert response.status_code == 302
    volume = Volume.objects.get(name="datasets")
    get_backend("default").volume_write(key=volume.key, used_bytes=50 * 1024**3)
    services.volumes_refresh()
    body = alice_client.get(reverse("storage")).content.decode()
    assert "datasets" in body and "200 GB" in body and "50.0\xa0GB" in body and "25.0%" in body
    assert "¥4.00" in body  # 200 GB × ¥0.02 per day
    assert region.name in body


def test_form_errors_are_shown_not_raised(rich_alice, alice_client):
    region = Region.objects.get(slug="cn-north-1")
    response = alice_client.post(reverse("storage"), {"name": "", "region": region.pk, "size_gb": 0})
    assert response.status_code == 200
    assert b"has-error" in response.content
    make_volume(rich_alice, name="taken")
    response = alice_client.post(reverse("storage"), {"name": "taken", "region": region.pk, "size_gb": 5})
    assert "You already have a volume named taken." in response.content.decode()


def test_only_regions_that_offer_volumes_are_offered(rich_alice, alice_client, settings):
    settings.PROVISIONING_BACKENDS = {
        **backends(),
        "blockless": {"BACKEND": "providers.simulated.backend.SimulatedBackend", "OPTIONS": {"VOLUMES": False}},
    }
    no_volumes = Region.objects.create(slug="edge-1", name="Edge without volumes", backend_alias="blockless")
    body = alice_client.get(reverse("storage")).content.decode()
    assert Region.objects.get(slug="cn-north-1").name in body
    assert no_volumes.name not in body
    response = alice_client.post(reverse("storage"), {"name": "x", "region": no_volumes.pk, "size_gb": 5})
    assert response.status_code == 200 and not Volume.objects.exists()


def test_delete_from_the_list_swaps_the_row_and_a_refusal_says_why_in_it(rich_alice, alice_client):
    kept, gone = make_volume(rich_alice, name="kept"), make_volume(rich_alice, name="gone")
    instance = running(rich_alice)
    services.volume_attach(user=rich_alice, volume=kept, instance=instance, mount_path="/mnt/k", mode="rw")
    headers = {"HTTP_HX_REQUEST": "true"}
    refused = alice_client.post(reverse("volume_delete", args=[kept.pk]), {"from": "list"}, **headers)
    assert refused.status_code == 200
    assert "is attached to" in refused.content.decode() and 'id="volume-' in refused.content.decode()
    with committed():
        deleted = alice_client.post(reverse("volume_delete", args=[gone.pk]), {"from": "list"}, **headers)
    assert deleted.status_code == 200 and b"<tr" in deleted.content
    gone.refresh_from_db()
    assert gone.status == Volume.Status.DELETED


def test_resize_attach_and_detach_from_the_volume_page(rich_alice, alice_client):
    volume = make_volume(rich_alice, size_gb=10)
    instance = running(rich_alice, name="trainer")
    page = alice_client.get(reverse("volume_detail", args=[volume.pk])).content.decode()
    assert "trainer" in page and "Attach to an instance" in page
    assert "take effect when the instance next starts or restarts" in page

    with committed():
        alice_client.post(reverse("volume_resize", args=[volume.pk]), {"size_gb": 20})
    volume.refresh_from_db()
    assert volume.size_gb == 20
    shrink = alice_client.post(reverse("volume_resize", args=[volume.pk]), {"size_gb": 5}, follow=True)
    assert "A volume can only grow" in shrink.content.decode()

    attached = alice_client.post(
        reverse("volume_attach", args=[volume.pk]),
        {"instance": instance.pk, "mount_path": "/mnt/train", "mode": "rw"},
        follow=True,
    )
    assert "mounted when the instance next starts or restarts" in attached.content.decode()
    attachment = volume.attachments.get()
    detached = alice_client.post(reverse("volume_detach", args=[volume.pk, attachment.pk]), follow=True)
    assert "stays mounted there until the instance stops or restarts" in detached.content.decode()
    attachment.refresh_from_db()
    assert attachment.detach_requested_at is not None


def test_the_launch_form_attaches_chosen_volumes(rich_alice, alice_client):
    volume = make_volume(rich_alice, name="weights")
    make_volume(rich_alice, name="unused")
    page = alice_client.get(reverse("instance_launch")).content.decode()
    assert 'id="launch-volumes"' in page and "weights" in page and 'value="/mnt/weights"' in page
    prefix = f"volume_{volume.pk.hex}"
    form = {
        "region": Region.objects.get(slug="cn-north-1").pk,
        "gpu_model": GpuModel.objects.get(slug="a800-80g").pk,
        "gpu_count": 1,
        "image": Image.objects.get(slug="pytorch-2.5-cu124").pk,
        "disk_gb": 50,
        f"{prefix}_attach": "on",
        f"{prefix}_path": "/models/weights",
        f"{prefix}_mode": "ro",
    }
    bad = alice_client.post(reverse("instance_launch"), {**form, f"{prefix}_path": "/etc"})
    assert bad.status_code == 200 and "Mount volumes at or under" in bad.content.decode()
    assert not Instance.objects.exists()
    with committed():
        response = alice_client.post(reverse("instance_launch"), form)
    assert response.status_code == 302
    instance = Instance.objects.get()
    assert list(instance.volume_attachments.values_list("volume__name", "mount_path", "mode")) == [
        ("weights", "/models/weights", "ro")
    ]
    detail = alice_client.get(reverse("instance_detail", args=[instance.pk])).content.decode()
    assert 'id="mounts"' in detail and "/models/weights" in detail and "Read-only" in detail


def test_the_list_page_query_count_does_not_grow_with_volumes(rich_alice, alice_client):
    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert alice_client.get(reverse("storage")).status_code == 200
        return len(ctx)

    instance = running(rich_alice)
    first = make_volume(rich_alice)
    services.volume_attach(user=rich_alice, volume=first, instance=instance, mount_path="/mnt/0", mode="ro")
    few = queries()
    for i in range(1, 6):
        volume = make_volume(rich_alice)
        services.volume_attach(user=rich_alice, volume=volume, instance=instance, mount_path=f"/mnt/{i}", mode="ro")
    assert queries() == few
