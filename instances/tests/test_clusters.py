"""Multi-node clusters on the simulated cloud: cards on distinct nodes, billed and counted as a whole,
all freed by a stop, a release or a failure."""

import pytest

from billing.models import Meter
from instances.errors import LaunchInvalid, NoCapacity, QuotaExceeded
from instances.models import Instance, Node
from instances.quota import quota_usage
from instances.services import instance_release, instance_start, instance_stop
from instances.skus import gpu_meter_ref
from instances.tests.conftest import committed, launch, running, simulate
from providers import get_backend
from providers.simulated.models import SimulatedMachine

S = Instance.Status


@pytest.fixture
def big_quota(settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 16


def _free(region="cn-north-1", gpu="a800-80g") -> dict[str, int]:
    return dict(
        Node.objects.filter(region__slug=region, gpu_model__slug=gpu).order_by("name").values_list("name", "free_cards")
    )


def test_two_nodes_of_eight_take_eight_cards_on_each_of_two_distinct_nodes(rich_alice, big_quota):
    instance = running(rich_alice, count=8, nodes=2)
    assert instance.status == S.RUNNING
    assert instance.node_count == 2
    assert len(instance.extra_nodes) == 1
    assert instance.extra_nodes[0] != instance.node.name
    assert set(instance.node_names) == set(_free())
    assert set(_free().values()) == {0}
    assert instance.hourly_price_fen == 16 * 190
    # The simulated cloud holds the machine on both nodes: neither takes another card.
    machine = SimulatedMachine.objects.get(key=instance.key)
    assert machine.spec["peers"] == instance.extra_nodes
    assert get_backend("default").machines()[0].cards == 16


def test_a_cluster_is_billed_for_every_card_of_every_node(rich_alice, big_quota):
    instance = running(rich_alice, count=8, nodes=2)
    meter = Meter.objects.get(ref=gpu_meter_ref(instance.pk), stopped_at__isnull=True)
    assert meter.quantity == 16
    assert meter.price_fen == 190
    assert "2 nodes × 8 × A800 80GB" in meter.description


def test_stopping_a_cluster_frees_both_nodes_and_starting_takes_two_again(rich_alice, big_quota):
    instance = running(rich_alice, count=8, nodes=2)
    with committed():
        instance_stop(instance=instance)
    instance.refresh_from_db()
    assert instance.status == S.STOPPED
    assert instance.node_id is None and instance.extra_nodes == []
    assert _free() == {name: 8 for name in _free()}
    with committed():
        instance_start(instance=instance)
    instance.refresh_from_db()
    assert instance.status == S.RUNNING
    assert len(set(instance.node_names)) == 2
    assert set(_free().values()) == {0}


def test_releasing_a_cluster_frees_both_nodes_once(rich_alice, big_quota):
    instance = running(rich_alice, count=8, nodes=2)
    with committed():
        instance_release(instance=instance)
        instance_release(instance=instance)
    instance.refresh_from_db()
    assert instance.status == S.RELEASED
    assert set(_free().values()) == {8}
    assert not SimulatedMachine.objects.filter(key=instance.key).exists()


def test_a_failed_cluster_launch_frees_every_node(rich_alice, big_quota):
    with simulate(FAIL_CREATE_PERMANENT=1), committed():
        instance = launch(rich_alice, count=8, nodes=2)
    instance.refresh_from_db()
    assert instance.status == S.FAILED
    assert set(_free().values()) == {8}


def test_it_refuses_a_cluster_when_only_one_node_has_the_cards_and_takes_none(rich_alice, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 32
    single = running(rich_alice, count=1)
    before = _free()
    with pytest.raises(NoCapacity) as exc:
        launch(rich_alice, count=8, nodes=2)
    assert exc.value.field == "node_count"
    assert "only 1 node" in exc.value.message
    assert _free() == before  # the node it could take was given back with the refusal
    assert list(Instance.objects.values_list("pk", flat=True)) == [single.pk]


def test_quota_counts_every_card_of_every_node(rich_alice, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 8
    with pytest.raises(QuotaExceeded) as exc:
        launch(rich_alice, count=8, nodes=2)
    assert "16 more" in exc.value.message
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 16
    instance = launch(rich_alice, count=8, nodes=2)
    assert quota_usage(user=rich_alice, gpu_model=instance.gpu_model) == 16


def test_funds_are_checked_for_the_whole_cluster_price(alice, catalogue, big_quota, settings):
    from instances.errors import FundsTooLow
    from instances.tests.conftest import fund

    settings.BILLING_MIN_RUNWAY_S = 600
    # ¥4: ten minutes of one node of 8 A800s (¥15.20/h → ¥2.53), not of two (¥30.40/h → ¥5.07).
    fund(alice, 400)
    with pytest.raises(FundsTooLow) as exc:
        launch(alice, count=8, nodes=2)
    assert "¥30.40/h" in exc.value.message
    assert set(_free().values()) == {8}
    assert launch(alice, count=8).hourly_price_fen == 1520


def test_it_refuses_a_node_count_that_is_not_offered(rich_alice, settings):
    settings.INSTANCES_MAX_NODES = 4
    for nodes in (0, 3, 8):
        with pytest.raises(LaunchInvalid) as exc:
            launch(rich_alice, nodes=nodes)
        assert exc.value.field == "node_count"
    assert not Instance.objects.exists()


# --- The REST API and the launch page -----------------------------------------------------------------------

BODY = {"region": "cn-north-1", "gpu_model": "a800-80g", "gpu_count": 8, "image": "pytorch-2.5-cu124", "disk_gb": 50}


def test_the_api_launches_a_cluster_and_returns_its_node_count(rich_alice, alice_client, big_quota):
    from django.urls import reverse

    response = alice_client.post(
        reverse("api-instance-list"), {**BODY, "node_count": 2}, content_type="application/json"
    )
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["node_count"] == 2
    assert data["gpu_count"] == 8
    assert data["hourly_price_fen"] == 16 * 190
    listed = alice_client.get(reverse("api-instance-list")).json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert rows[0]["node_count"] == 2


@pytest.mark.parametrize("node_count", [0, 3, "two", None, 256])
def test_the_api_refuses_a_bad_node_count_with_a_400_on_that_field(rich_alice, alice_client, node_count):
    from django.urls import reverse

    response = alice_client.post(
        reverse("api-instance-list"), {**BODY, "node_count": node_count}, content_type="application/json"
    )
    assert response.status_code == 400, response.content
    assert "node_count" in response.json()["error"]["fields"]
    assert not Instance.objects.exists()


def test_the_api_refuses_more_nodes_than_the_console_allows(rich_alice, alice_client, settings):
    from django.urls import reverse

    settings.INSTANCES_MAX_NODES = 2
    response = alice_client.post(
        reverse("api-instance-list"), {**BODY, "node_count": 4}, content_type="application/json"
    )
    assert response.status_code == 400, response.content
    assert "node_count" in response.json()["error"]["fields"]


def test_the_api_says_no_capacity_for_a_cluster_larger_than_the_region(rich_alice, alice_client, settings):
    from django.urls import reverse

    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    response = alice_client.post(
        reverse("api-instance-list"), {**BODY, "node_count": 4}, content_type="application/json"
    )
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "no_capacity"
    assert set(_free().values()) == {8}


def test_the_launch_form_makes_a_cluster_and_the_pages_show_its_shape(rich_alice, alice_client, big_quota):
    from django.urls import reverse

    from instances.models import GpuModel, Image, Region

    page = alice_client.get(reverse("instance_launch"))
    assert page.status_code == 200
    assert 'name="node_count"' in page.content.decode()
    response = alice_client.post(
        reverse("instance_launch"),
        {
            "region": Region.objects.get(slug="cn-north-1").pk,
            "gpu_model": GpuModel.objects.get(slug="a800-80g").pk,
            "gpu_count": 8,
            "node_count": 2,
            "image": Image.objects.get(slug="pytorch-2.5-cu124").pk,
            "disk_gb": 50,
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    instance = Instance.objects.get()
    assert instance.node_count == 2
    assert "2 nodes × 8 × A800 80GB" in alice_client.get(reverse("instances")).content.decode()
    detail = alice_client.get(reverse("instance_detail", args=[instance.pk])).content.decode()
    assert "2 nodes × 8 × A800 80GB" in detail
    assert ", ".join(instance.node_names) in detail


def test_the_launch_form_shows_the_cluster_refusal_on_the_nodes_field(rich_alice, alice_client, settings):
    from django.urls import reverse

    from instances.models import GpuModel, Image, Region

    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    response = alice_client.post(
        reverse("instance_launch"),
        {
            "region": Region.objects.get(slug="cn-north-1").pk,
            "gpu_model": GpuModel.objects.get(slug="a800-80g").pk,
            "gpu_count": 8,
            "node_count": 4,
            "image": Image.objects.get(slug="pytorch-2.5-cu124").pk,
            "disk_gb": 50,
        },
    )
    assert response.status_code == 200
    assert "only 2 nodes" in response.content.decode()
    assert not Instance.objects.exists()


def test_the_launch_options_say_how_many_nodes_fit_each_card_count(rich_alice):
    from instances.selectors import launch_options_for

    running(rich_alice, count=2)
    options = launch_options_for(user=rich_alice)
    a800 = next(g for g in options["gpus"] if g["slug"] == "a800-80g")
    region = next(r for r in options["regions"] if r["slug"] == "cn-north-1")
    assert a800["regions"][str(region["id"])]["fits"] == {"1": 2, "2": 2, "4": 2, "8": 1}
    assert region["max_nodes"] == 8


# --- A backend of one host ------------------------------------------------------------------------------------


def test_the_local_backend_refuses_a_cluster_at_launch(rich_alice, settings, tmp_path):
    from instances.catalogue import catalogue_seed
    from providers.local.tests.local_helpers import local_backends

    settings.PROVISIONING_BACKENDS = local_backends(tmp_path / "instances")
    catalogue_seed()
    assert get_backend("local").max_nodes == 1
    with pytest.raises(LaunchInvalid) as exc:
        launch(rich_alice, region="local", gpu="h200", count=1, nodes=2)
    assert exc.value.field == "node_count"
    assert "1 node at most" in exc.value.message
    assert not Instance.objects.exists()
