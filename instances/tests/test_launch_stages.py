"""What the user sees of an image and a boot: the launch page's sizes, contents and cache, the instance
page's pull progress and launch timeline, and a failed pull that says why and bills nothing."""

from __future__ import annotations

import re
from datetime import timedelta
from unittest import mock

import pytest
from django.template.defaultfilters import filesizeformat
from django.utils import timezone

from billing.models import Meter
from instances.models import Image, Instance, Node
from instances.services import instance_sync, nodes_sync
from instances.skus import gpu_meter_ref
from instances.tests.conftest import committed, launch, simulate

pytestmark = pytest.mark.django_db
S = Instance.Status
GB = 1_000_000_000


def _cache_line(body: str, image: Image, node: Node) -> str:
    """What the image's card says of the nodes of ``node``'s region and GPU model."""
    block = body.split(f'data-image="{image.pk}"', 1)[1].split("</label>", 1)[0]
    where = f'data-image-cache-region="{node.region_id}" data-image-cache-gpu="{node.gpu_model_id}"'
    match = re.search(rf"{where}(?: hidden)?>([^<]*)<", block)
    assert match, block
    return match.group(1)


def test_the_launch_page_lists_each_images_size_contents_and_whether_the_regions_nodes_hold_it(
    rich_alice, alice_client
):
    torch = Image.objects.get(slug="pytorch-2.5-cu124")
    torch.contents = {"python": "3.12.7", "cuda": "12.4", "torch": "2.5.1"}
    torch.size_bytes = 9 * GB
    torch.save()
    jax = Image.objects.get(slug="jax-0.4-cu124")
    with simulate(PRECACHED=[torch.cache_key]):
        nodes_sync(alias="default")
    north_a800 = Node.objects.filter(region__slug="cn-north-1", gpu_model__slug="a800-80g").first()

    body = alice_client.get("/instances/launch/").content.decode()

    torch_card = body.split(f'data-image="{torch.pk}"', 1)[1].split("</label>", 1)[0]
    assert filesizeformat(9 * GB) in torch_card
    assert "Python 3.12.7" in torch_card and "CUDA 12.4" in torch_card and "PyTorch 2.5.1" in torch_card
    assert _cache_line(body, torch, north_a800) == "Cached on every node of this model here: starts without a pull"
    assert (
        _cache_line(body, jax, north_a800) == f"Not cached here: the first boot pulls {filesizeformat(jax.size_bytes)}"
    )


def test_a_node_that_pulled_an_image_counts_as_holding_it_on_the_launch_page_at_once(rich_alice, alice_client):
    image = Image.objects.get(slug="pytorch-2.5-cu124")
    with simulate(PULL_BYTES_PER_S=10 * GB), committed():
        nodes_sync(alias="default")
        instance = launch(rich_alice)
    t = timezone.now() + timedelta(seconds=5)
    with simulate(PULL_BYTES_PER_S=10 * GB), mock.patch("django.utils.timezone.now", return_value=t):
        instance_sync(instance_id=instance.pk)
    instance.refresh_from_db()
    assert instance.status == S.RUNNING

    body = alice_client.get("/instances/launch/").content.decode()
    node = Node.objects.get(pk=instance.node_id)
    assert _cache_line(body, image, node) == "Cached on 1 of 2 nodes of this model here; elsewhere it is pulled first"
    assert Node.objects.get(pk=instance.node_id).cached_images == [image.cache_key]


def test_while_the_image_is_pulled_the_page_shows_bytes_rate_and_time_left_then_each_stage_with_its_duration(
    rich_alice, alice_client
):
    # 8.9 GB at 1 GB/s: placed for 1 s, pulling 8.9 s, then image ready 2 s, container started 3 s,
    # servers answering 4 s (BOOT_DELAY_S 10 shared 10/20/30/40 %).
    options = {"PULL_BYTES_PER_S": GB, "BOOT_DELAY_S": 10}
    t0 = timezone.now()
    with simulate(**options), mock.patch("django.utils.timezone.now", return_value=t0), committed():
        instance = launch(rich_alice)

    def poll_at(seconds: float) -> None:
        at = t0 + timedelta(seconds=seconds)
        with simulate(**options), mock.patch("django.utils.timezone.now", return_value=at), committed():
            instance_sync(instance_id=instance.pk)

    poll_at(3)
    poll_at(5)  # 4 of 8.9 GB, 2 GB in the last 2 s
    page = alice_client.get(f"/instances/{instance.pk}/").content.decode()
    figures = page.split('id="pull-figures">', 1)[1].split("</div>", 1)[0]
    assert filesizeformat(4 * GB) in figures and filesizeformat(8_900_000_000) in figures and "(44%)" in figures
    assert f"{filesizeformat(GB)}/s" in figures and "about 4.9 s left" in figures
    assert 'data-stage="pulling"' in page and "in progress" in page

    for seconds in (11, 13, 16, 20):
        poll_at(seconds)
    instance.refresh_from_db()
    assert instance.status == S.RUNNING
    page = alice_client.get(f"/instances/{instance.pk}/").content.decode()
    assert 'id="image-pull"' not in page
    stages = re.findall(r'data-stage="(\w+)"><div class="step-body"><strong>[^<]+</strong> <span[^>]*>([^<]+)<', page)
    assert [key for key, _took in stages] == [
        "queued",
        "placed",
        "pulling",
        "image_ready",
        "container_started",
        "servers_answering",
    ]
    took = dict(stages)
    # Measured between the polls that first saw each stage: placed at 0 s, pulling at 3, image ready at
    # 11, container started at 13, servers answering at 16, running at 20.
    assert took["placed"] == "3.0 s" and took["pulling"] == "8.0 s" and took["image_ready"] == "2.0 s"
    assert took["container_started"] == "3.0 s" and took["servers_answering"] == "4.0 s"


def test_a_failed_pull_says_why_and_bills_nothing(rich_alice, alice_client):
    options = {"PULL_BYTES_PER_S": GB, "FAIL_PULL": 1}
    t0 = timezone.now()
    with simulate(**options), mock.patch("django.utils.timezone.now", return_value=t0), committed():
        instance = launch(rich_alice)
    at = t0 + timedelta(seconds=6)
    with simulate(**options), mock.patch("django.utils.timezone.now", return_value=at), committed():
        instance_sync(instance_id=instance.pk)

    instance.refresh_from_db()
    assert instance.status == S.FAILED
    page = alice_client.get(f"/instances/{instance.pk}/").content.decode()
    alert = page.split('class="alert error">', 1)[1].split("</div>", 1)[0]
    assert "Boot failed: pulling" in alert and "the registry closed the connection" in alert
    assert 'class="failed" data-stage="pulling"' in page
    # It never ran: no meter was opened for it, and its card went back to its node.
    assert not Meter.objects.filter(ref__startswith=f"instance:{instance.pk}:").exists()
    assert gpu_meter_ref(instance.pk).startswith(f"instance:{instance.pk}:")
    assert all(node.free_cards == node.total_cards for node in Node.objects.all())


def test_the_api_gives_the_pinned_image_the_boot_stages_and_the_pull(rich_alice, alice_client):
    options = {"PULL_BYTES_PER_S": GB, "BOOT_DELAY_S": 10}
    t0 = timezone.now()
    with simulate(**options), mock.patch("django.utils.timezone.now", return_value=t0), committed():
        instance = launch(rich_alice)
    for seconds in (3, 5):
        at = t0 + timedelta(seconds=seconds)
        with simulate(**options), mock.patch("django.utils.timezone.now", return_value=at), committed():
            instance_sync(instance_id=instance.pk)

    body = alice_client.get(f"/api/v1/instances/{instance.pk}/").json()
    assert [s["stage"] for s in body["boot"]["stages"]] == ["queued", "placed", "pulling"]
    assert body["boot"]["stages"][1]["seconds"] == 3.0 and body["boot"]["stages"][2]["seconds"] is None
    assert body["boot"]["pull"] == {
        "bytes_done": 4 * GB,
        "bytes_total": 8_900_000_000,
        "bytes_per_second": 1.0 * GB,
        "seconds_left": pytest.approx(4.9),
    }
    listed = alice_client.get("/api/v1/instances/").json()["results"][0]
    assert listed["boot"] == body["boot"]

    images = {i["slug"]: i for i in alice_client.get("/api/v1/catalogue/").json()["images"]}
    assert images["pytorch-2.5-cu124"]["size_bytes"] == 8_900_000_000
