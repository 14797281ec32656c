"""Several backends at once: each region is served by its own backend, and placement, the reconciler,
the launch page, the fleet page and billing all keep to the region's backend."""

from datetime import timedelta

import pytest
from django.urls import reverse

from billing.models import Meter
from billing.selectors import balance_get
from billing.settlement import meters_settle_all
from instances.catalogue import catalogue_seed
from instances.models import GpuModel, Instance, Node, Region
from instances.reconciler import instances_reconcile
from instances.services import nodes_ensure, nodes_sync
from instances.skus import gpu_meter_ref
from instances.tests.conftest import committed, fund, launch, running
from providers import get_backend
from providers.simulated.models import SimulatedMachine

S = Instance.Status

NORTH_FLEET = [
    {"region": "cn-north-1", "gpu": "a800-80g", "nodes": 2, "cards": 8},
    # A node this backend claims in the other backend's region: it must be ignored there.
    {"region": "cn-east-1", "gpu": "h800", "nodes": 1, "cards": 8},
]
EAST_FLEET = [
    {"region": "cn-east-1", "gpu": "h800", "nodes": 2, "cards": 4},
    {"region": "cn-east-1", "gpu": "l40s", "nodes": 1, "cards": 8},
]


def two_backends(**east_options) -> dict:
    return {
        "default": {
            "BACKEND": "providers.simulated.backend.SimulatedBackend",
            "OPTIONS": {"FLEET": NORTH_FLEET, "BOOT_DELAY_S": 0},
        },
        "east": {
            "BACKEND": "providers.simulated.backend.SimulatedBackend",
            "OPTIONS": {
                "FLEET": EAST_FLEET,
                "BOOT_DELAY_S": 0,
                "REGION": "cn-east-1",
                "REGION_NAME": "East China 1 (Shanghai)",
                **east_options,
            },
        },
    }


@pytest.fixture
def regions(settings, db):
    settings.PROVISIONING_BACKENDS = two_backends()
    catalogue_seed()
    nodes_ensure()


@pytest.fixture
def rich_bob(bob, regions):
    fund(bob, 1_000_000)
    return bob


def test_a_backend_that_declares_a_region_gets_it_when_the_catalogue_is_seeded(regions, settings):
    assert dict(Region.objects.values_list("slug", "backend_alias")) == {
        "cn-north-1": "default",
        "cn-east-1": "east",
    }
    settings.PROVISIONING_BACKENDS = {
        **two_backends(),
        "gz": {"BACKEND": "providers.simulated.backend.SimulatedBackend", "OPTIONS": {"REGION": "cn-south-1"}},
    }
    catalogue_seed()
    catalogue_seed()
    south = Region.objects.get(slug="cn-south-1")
    assert (south.name, south.backend_alias) == ("cn-south-1", "gz")
    assert Region.objects.get(slug="cn-east-1").name == "East China 1 (Shanghai)"


def test_each_backends_nodes_land_in_its_own_regions_only(regions):
    east = Region.objects.get(slug="cn-east-1")
    assert sorted(Node.objects.filter(region=east).values_list("backend_alias", "name")) == [
        ("east", "cn-east-1-h800-01"),
        ("east", "cn-east-1-h800-02"),
        ("east", "cn-east-1-l40s-01"),
    ]
    assert set(Node.objects.filter(backend_alias="default").values_list("region__slug", flat=True)) == {"cn-north-1"}


def test_an_instance_launched_in_region_b_is_placed_on_region_bs_backend(rich_bob):
    instance = running(rich_bob, region="cn-east-1", gpu="h800", count=4)

    assert instance.status == S.RUNNING
    assert (instance.backend_alias, instance.node.backend_alias) == ("east", "east")
    assert instance.node.name.startswith("cn-east-1-h800-")
    assert SimulatedMachine.objects.get(key=instance.key).backend_alias == "east"
    assert [m.key for m in get_backend("east").machines()] == [instance.key]
    assert get_backend("default").machines() == []
    # The north backend's H800 node claimed for cn-east-1 had 8 cards; east's have 4: one is full now.
    assert Node.objects.get(pk=instance.node_id).free_cards == 0


def test_region_b_has_only_its_own_capacity(rich_bob, settings):
    from instances.errors import NoCapacity

    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64

    with committed():
        launch(rich_bob, region="cn-east-1", gpu="h800", count=4)
        launch(rich_bob, region="cn-east-1", gpu="h800", count=4)
        # East has no more H800 cards, though the north backend reports an 8-card H800 node "in" cn-east-1.
        with pytest.raises(NoCapacity):
            launch(rich_bob, region="cn-east-1", gpu="h800", count=1)
        with pytest.raises(NoCapacity):  # and no A800s at all
            launch(rich_bob, region="cn-east-1", gpu="a800-80g", count=1)


def test_an_instance_in_region_b_is_billed_at_its_gpu_models_price(rich_bob):
    instance = running(rich_bob, region="cn-east-1", gpu="l40s", count=2)
    meter = Meter.objects.get(ref=gpu_meter_ref(instance.pk))
    price = GpuModel.objects.get(slug="l40s").price_per_card_hour_fen
    assert (meter.sku.code, meter.price_fen, meter.quantity) == ("gpu.l40s", price, 2)
    before = balance_get(user=rich_bob).total

    meters_settle_all(now=meter.started_at + timedelta(hours=1))

    assert before - balance_get(user=rich_bob).total == 2 * price


def test_the_reconciler_visits_every_backend(rich_bob, settings):
    north = running(rich_bob, region="cn-north-1")
    east = running(rich_bob, region="cn-east-1", gpu="l40s")
    get_backend("east").node_lose(name=east.node.name)

    with committed():
        report = instances_reconcile()

    north.refresh_from_db()
    east.refresh_from_db()
    assert (north.status, east.status) == (S.RUNNING, S.LOST)
    assert report["unreachable"] == []
    assert report["regions"]["cn-east-1"] | {"free_cards": None} == {
        "backend": "east",
        "configured": True,
        "reachable": True,
        "nodes": 3,
        "unhealthy_nodes": 1,
        "health_changes": 1,
        "total_cards": 16,
        "free_cards": None,
        "synced": 1,
        "lost": 1,
    }
    assert report["regions"]["cn-east-1"]["free_cards"] == 8  # the two healthy H800 nodes
    assert report["regions"]["cn-north-1"]["lost"] == 0


def test_one_unreachable_backend_does_not_stop_the_reconciler_for_the_others(rich_bob, settings):
    north = running(rich_bob, region="cn-north-1")
    settings.PROVISIONING_BACKENDS = two_backends(UNREACHABLE=True)
    get_backend("default").stop(key=north.key, state=north.backend_state)

    with committed():
        report = instances_reconcile()

    north.refresh_from_db()
    assert north.status == S.STOPPED  # the north backend was still reconciled
    assert report["unreachable"] == ["east"]
    assert report["regions"]["cn-east-1"]["reachable"] is False
    assert report["regions"]["cn-north-1"]["reachable"] is True


def test_the_launch_page_offers_every_region_with_its_models_free_cards_and_prices(rich_bob, client_for):
    body = client_for(rich_bob).get(reverse("instance_launch")).content.decode()
    assert "North China 1 (Beijing)" in body and "East China 1 (Shanghai)" in body
    # East: 2 × 4 H800 + 8 L40S; the north backend's H800 "in" cn-east-1 is not counted.
    assert "16 of 16 cards free · 2 GPU models · from ¥2.60 per card-hour" in body
    assert "16 of 16 cards free · 1 GPU model · from ¥1.90 per card-hour" in body
    assert "H800 80GB, L40S 48GB" in body


def test_a_region_whose_backend_is_not_configured_is_not_offered_and_cannot_be_launched(rich_bob, client_for):
    Region.objects.create(slug="cn-west-1", name="West China 1", backend_alias="nowhere")
    client = client_for(rich_bob)
    assert "West China 1" not in client.get(reverse("instance_launch")).content.decode()
    response = client.post(
        "/api/v1/instances/",
        {"region": "cn-west-1", "gpu_model": "h800", "gpu_count": 1, "image": "pytorch-2.5-cu124", "disk_gb": 50},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert not Instance.objects.exists()


def test_the_fleet_page_lists_region_bs_instance_under_region_b(rich_bob, client_for, staff):
    instance = running(rich_bob, region="cn-east-1", gpu="h800", count=2)
    body = client_for(staff).get(reverse("staff_fleet")).content.decode()
    east = body[body.index('id="region-cn-east-1"') :]
    east = east[: east.index('class="card fleet-region"') if 'class="card fleet-region"' in east else None]
    assert "<code>east</code>" in east and "providers.simulated.backend.SimulatedBackend" in east
    assert f'data-node="{instance.node.name}"' in east
    assert f"?node__id__exact={instance.node_id}" in east
    north = body[body.index('id="region-cn-north-1"') :]
    assert instance.node.name not in north


def test_nodes_sync_of_one_backend_leaves_the_others_nodes_alone(regions):
    get_backend("east").node_lose(name="cn-east-1-l40s-01")
    nodes_sync(alias="east")
    assert Node.objects.filter(is_healthy=False).count() == 1
    nodes_sync(alias="default")
    assert Node.objects.filter(is_healthy=False).count() == 1


def test_the_catalogue_seed_command_creates_the_backends_regions_and_reads_their_nodes(settings, db):
    from io import StringIO

    from django.core.management import call_command

    settings.PROVISIONING_BACKENDS = two_backends()
    out = StringIO()
    call_command("catalogue_seed", stdout=out)
    call_command("catalogue_seed", stdout=out)
    assert "cn-east-1: East China 1 (Shanghai) (backend east)" in out.getvalue()
    assert Node.objects.filter(backend_alias="east").count() == 3
    assert Node.objects.filter(backend_alias="default").count() == 2
    from accounts.models import User

    assert not User.objects.exists()
