"""The launch page starts on a sensible card: the user's last choice while it has room, else the
cheapest GPU model with room in the chosen region; never the priciest because it sorts first.

The small fleet: A800 (¥1.90) and H800 (¥11.90) nodes in cn-north-1, an A800 node in cn-east-1; the
catalogue's H200 (¥14.90, listed first) and RTX 3090 (¥1.32, the cheapest) have no nodes at all.
"""

from __future__ import annotations

from django.urls import reverse

from instances.models import GpuModel, Instance, Region
from instances.selectors import capacity_by_region_model, launch_default_gpu
from instances.services import instance_release, nodes_ensure
from instances.tests.conftest import fund, running


def _initial(client) -> tuple[str, str]:
    """The region and GPU model the page renders checked, as slugs."""
    response = client.get(reverse("instance_launch"))
    assert response.status_code == 200
    form = response.context["form"]
    region = Region.objects.get(pk=form["region"].value())
    gpu = GpuModel.objects.get(pk=form["gpu_model"].value())
    body = response.content.decode()
    assert f'name="gpu_model" value="{gpu.pk}" checked' in body
    return region.slug, gpu.slug


def test_a_newcomer_with_the_trial_credit_starts_on_the_cheapest_card_with_room(alice, alice_client, catalogue):
    fund(alice, 1000)  # ¥10, as the trial credit
    assert GpuModel.objects.first().slug == "h200"  # what the page used to preselect
    region, gpu = _initial(alice_client)
    assert gpu == "a800-80g"  # not the H200, and not the RTX 3090, which has no node anywhere
    assert region == Region.objects.first().slug


def test_it_starts_on_the_users_last_choice_while_that_has_room(rich_alice, alice_client):
    running(rich_alice, gpu="h800", region="cn-north-1")
    assert _initial(alice_client) == ("cn-north-1", "h800")


def test_a_released_instance_still_counts_as_the_last_choice(rich_alice, alice_client):
    instance = running(rich_alice, gpu="h800", region="cn-north-1")
    instance_release(instance=instance)
    assert _initial(alice_client) == ("cn-north-1", "h800")


def test_it_falls_back_to_the_cheapest_with_room_when_the_last_choice_is_full(rich_alice, alice_client):
    running(rich_alice, gpu="h800", count=8, region="cn-north-1")  # the only H800 node, full
    assert _initial(alice_client) == ("cn-north-1", "a800-80g")


def test_each_region_gets_its_own_default(rich_alice, alice_client):
    running(rich_alice, gpu="h800", region="cn-north-1")
    response = alice_client.get(reverse("instance_launch"))
    defaults = response.context["options"]["defaults"]
    by_slug = {
        Region.objects.get(pk=int(pk)).slug: GpuModel.objects.get(pk=gpu).slug
        for pk, gpu in defaults["gpu_by_region"].items()
    }
    # cn-east-1 has no H800: there the last choice gives way to the cheapest with room.
    assert by_slug == {"cn-north-1": "h800", "cn-east-1": "a800-80g"}


def test_charlie_does_not_start_on_alices_last_choice(rich_alice, charlie, charlie_client):
    running(rich_alice, gpu="h800", region="cn-north-1")
    assert Instance.objects.filter(owner=charlie).count() == 0
    assert _initial(charlie_client)[1] == "a800-80g"


def test_with_no_room_anywhere_it_falls_back_to_the_cheapest_model(catalogue):
    region = Region.objects.get(slug="cn-north-1")
    models = list(GpuModel.objects.filter(is_active=True))
    chosen = launch_default_gpu(gpus=models, region=region, capacity={})
    assert GpuModel.objects.get(pk=chosen).slug == "rtx-3090"
    assert launch_default_gpu(gpus=[], region=region, capacity={}) is None


def test_a_last_choice_that_is_no_longer_offered_is_ignored(catalogue):
    region = Region.objects.get(slug="cn-north-1")
    h800 = GpuModel.objects.get(slug="h800")
    h800.is_active = False
    h800.save()
    nodes_ensure()
    capacity = capacity_by_region_model()
    models = list(GpuModel.objects.filter(is_active=True))
    chosen = launch_default_gpu(gpus=models, region=region, capacity=capacity, last_gpu_id=h800.pk)
    assert GpuModel.objects.get(pk=chosen).slug == "a800-80g"
