"""Tiers and preemption on the simulated cloud: on-demand work takes cards back from interruptible work.

The H800 node of the small fleet (8 cards) is filled with interruptible instances; an on-demand
launch then preempts the smallest set that frees enough, the victims get their grace period and
checkpoint, power off with their disks, and come back by themselves with the same identity.
"""

from datetime import timedelta

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from billing.models import Meter
from instances.capacity.preemption import instance_preemption_finish, instances_requeue, preemptions_finish_due
from instances.capacity.takeback import smallest_set
from instances.errors import LaunchInvalid, NoCapacity
from instances.models import GpuModel, Image, Instance, Node, Region
from instances.services import instance_release, instance_stop
from instances.skus import gpu_meter_ref
from instances.tests.conftest import committed, fund, running
from notifications.models import Kind, Notification
from providers import get_backend

S = Instance.Status
T = Instance.Tier


def launch(user, **options) -> Instance:
    """The shared helper on this file's fleet, the H800 node, run through its worker."""
    return running(user, **{"gpu": "h800", **options})


def after_grace(instance: Instance) -> None:
    """The grace period is over (as the finish task, scheduled with its countdown, would find)."""
    with committed():
        assert instance_preemption_finish(instance_id=instance.pk, now=timezone.now() + timedelta(seconds=31))


def open_gpu_meter(instance):
    return Meter.objects.filter(ref=gpu_meter_ref(instance.pk), stopped_at__isnull=True).first()


@pytest.fixture
def bob_rich(bob, catalogue):
    fund(bob, 1_000_000)
    return bob


@pytest.fixture
def spot_fleet(rich_alice, settings):
    """The H800 node full of alice's interruptible instances: 4 + 2 + 1 + 1 cards."""
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    spots = [launch(rich_alice, count=n, tier=T.INTERRUPTIBLE, checkpoint=f"python save.py {n}") for n in (4, 2, 1, 1)]
    assert all(s.status == S.RUNNING for s in spots)
    assert Node.objects.get(gpu_model__slug="h800").free_cards == 0
    return spots


# --- Tiers and prices ----------------------------------------------------------------------------------------


def test_interruptible_is_priced_and_billed_at_the_catalogues_spot_price(rich_alice):
    h800 = GpuModel.objects.get(slug="h800")
    assert h800.spot_price_fen == 595 < h800.price_per_card_hour_fen
    spot = launch(rich_alice, count=2, tier=T.INTERRUPTIBLE)
    assert spot.hourly_price_fen == 2 * 595
    meter = open_gpu_meter(spot)
    assert (meter.sku.code, meter.price_fen, meter.quantity) == ("gpu.h800.spot", 595, 2)
    on_demand = launch(rich_alice, count=1)
    assert open_gpu_meter(on_demand).sku.code == "gpu.h800"


def test_a_model_without_a_spot_price_costs_half(catalogue):
    model = GpuModel.objects.get(slug="h200")
    model.spot_price_per_card_hour_fen = None
    assert model.spot_price_fen == 745  # 1490 / 2


def test_an_unknown_tier_is_refused(rich_alice):
    with pytest.raises(LaunchInvalid) as exc:
        launch(rich_alice, tier="cheapest")
    assert exc.value.field == "tier"


def test_the_launch_page_shows_the_spot_price_and_the_tier(alice_client, catalogue):
    page = alice_client.get(reverse("instance_launch"))
    assert page.status_code == 200
    body = page.content.decode()
    assert "¥5.95 interruptible" in body  # H800's spot price, before launch
    assert 'name="tier"' in body and 'name="checkpoint_command"' in body


def test_the_api_launches_interruptible_and_refuses_a_bad_tier(rich_alice, alice_client):
    body = {"region": "cn-north-1", "gpu_model": "h800", "gpu_count": 1, "image": "pytorch-2.5-cu124"}
    bad = alice_client.post("/api/v1/instances/", {**body, "tier": "free"}, content_type="application/json")
    assert bad.status_code == 400
    assert "tier" in bad.json()["error"]["fields"]
    ok = alice_client.post(
        "/api/v1/instances/",
        {**body, "tier": "interruptible", "checkpoint_command": "python save.py"},
        content_type="application/json",
    )
    assert ok.status_code == 201, ok.content
    assert ok.json()["tier"] == "interruptible"
    assert ok.json()["hourly_price_fen"] == 595
    catalogue = alice_client.get(reverse("api-catalogue")).json()
    assert {m["slug"]: m["spot_price_per_card_hour_fen"] for m in catalogue["gpu_models"]}["h800"] == 595


# --- The smallest set ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sizes", "deficit", "freed"),
    [
        ((4, 2, 1, 1), 4, (4,)),  # one victim beats two
        ((4, 2, 1, 1), 2, (2,)),  # the 2 wastes nothing; the 4 would waste two
        ((4, 2, 1, 1), 5, (4, 1)),
        ((2, 2, 2, 1, 1), 3, (2, 1)),
        ((1, 1, 1, 1, 1, 1, 1, 1), 3, (1, 1, 1)),
        ((2, 1), 4, None),
        ((8,), 0, ()),
    ],
)
def test_the_smallest_set_frees_enough_with_the_fewest_victims_then_the_fewest_cards(sizes, deficit, freed):
    chosen = smallest_set(sizes, deficit)
    assert (None if chosen is None else tuple(sizes[i] for i in chosen)) == freed


# --- Preemption, grace, requeue -----------------------------------------------------------------------------


def test_on_demand_preempts_the_smallest_set_and_waits_for_its_grace_period(spot_fleet, bob_rich):
    four, two, one_a, one_b = spot_fleet
    before = timezone.now()
    on_demand = launch(bob_rich, count=4)
    four.refresh_from_db()
    assert four.status == S.PREEMPTING and four.preempted_for_id == on_demand.pk
    assert [s.status for s in Instance.objects.filter(pk__in=[two.pk, one_a.pk, one_b.pk])] == [S.RUNNING] * 3
    # Billing stopped at the second of preemption.
    meter = Meter.objects.get(ref=gpu_meter_ref(four.pk))
    assert before <= meter.stopped_at <= timezone.now()
    # The checkpoint ran and the owner was warned; the on-demand machine waits for the cards.
    assert get_backend("default").machine_checkpoints(key=four.key) == ["python save.py 4"]
    assert any("is being preempted" in m.subject for m in mail.outbox)
    told = Notification.objects.get(user_id=four.owner_id, kind=Kind.PREEMPTED)  # the inbox has it too
    assert told.link == f"/instances/{four.pk}/" and "is being preempted" in told.title
    assert on_demand.status == S.PROVISIONING
    assert str(on_demand.pk) not in {m.key for m in get_backend("default").machines()}
    # No card counted twice: the victim holds none, the on-demand instance its four.
    assert four.node_id is None and on_demand.node.name == "cn-north-1-h800-01"
    assert Node.objects.get(gpu_model__slug="h800").free_cards == 0

    # Not before the grace period ends.
    assert not instance_preemption_finish(instance_id=four.pk)
    after_grace(four)
    four.refresh_from_db()
    on_demand.refresh_from_db()
    assert four.status == S.PREEMPTED
    assert on_demand.status == S.RUNNING
    machine = {m.key: m for m in get_backend("default").machines()}[four.key]
    assert machine.observed == "stopped"  # powered off, its disk kept
    timeline = [e.reason_text for e in four.events.order_by("created_at", "id")]
    assert any("needed for on-demand work" in r for r in timeline)
    assert any("grace period" in r for r in timeline)


def test_a_preempted_instance_restarts_by_itself_with_the_same_identity_when_capacity_returns(spot_fleet, bob_rich):
    four = spot_fleet[0]
    on_demand = launch(bob_rich, count=4)
    after_grace(four)
    assert instances_requeue() == 0  # still full: it waits
    with committed():
        instance_release(instance=Instance.objects.get(pk=on_demand.pk))
    # The cards going back requeued it (the task on commit); the same row, key and disk.
    again = Instance.objects.get(pk=four.pk)
    assert again.status == S.RUNNING
    assert again.node.name == "cn-north-1-h800-01"
    assert [m.key for m in get_backend("default").machines()].count(four.key) == 1
    assert any("restarting after preemption" in m.subject for m in mail.outbox)
    assert Notification.objects.filter(user_id=four.owner_id, kind=Kind.RECOVERED).count() == 1
    # Billed while running, not while preempted: two meters, the gap between them unbilled.
    first, second = Meter.objects.filter(ref=gpu_meter_ref(four.pk)).order_by("started_at")
    preempted_at = four.events.get(new=S.PREEMPTING).created_at
    running_again = again.events.filter(new=S.RUNNING).order_by("-created_at").first().created_at
    assert first.stopped_at == preempted_at and second.started_at == running_again
    assert second.stopped_at is None and second.sku.code == "gpu.h800.spot"


def test_interruptible_work_never_preempts(spot_fleet, rich_alice):
    with pytest.raises(NoCapacity):
        launch(rich_alice, count=1, tier=T.INTERRUPTIBLE)
    assert Instance.objects.filter(status=S.PREEMPTING).count() == 0


def test_no_set_frees_enough_when_free_cards_plus_spot_work_fall_short(rich_alice, bob_rich, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    launch(rich_alice, count=4)  # on-demand: never preempted
    launch(rich_alice, count=4, tier=T.INTERRUPTIBLE)
    with pytest.raises(NoCapacity):
        launch(bob_rich, count=8)
    assert Instance.objects.filter(status=S.PREEMPTING).count() == 0
    assert Node.objects.get(gpu_model__slug="h800").free_cards == 0


def test_the_reconciler_finishes_a_grace_period_whose_task_was_lost(spot_fleet, bob_rich):
    on_demand = launch(bob_rich, count=1)
    victim = Instance.objects.get(preempted_for=on_demand)
    assert victim.gpu_count == 1
    assert preemptions_finish_due() == 0
    Instance.objects.filter(pk=victim.pk).update(status_changed_at=timezone.now() - timedelta(seconds=31))
    with committed():
        assert preemptions_finish_due() == 1
    assert Instance.objects.get(pk=victim.pk).status == S.PREEMPTED
    assert Instance.objects.get(pk=on_demand.pk).status == S.RUNNING


def test_its_owner_can_stop_a_preempted_instance_to_take_it_out_of_the_queue(spot_fleet, bob_rich):
    four = spot_fleet[0]
    on_demand = launch(bob_rich, count=4)
    after_grace(four)
    with committed():
        instance_stop(instance=Instance.objects.get(pk=four.pk))
    with committed():
        instance_release(instance=Instance.objects.get(pk=on_demand.pk))
    assert Instance.objects.get(pk=four.pk).status == S.STOPPED  # not requeued: its owner stopped it


def test_the_launch_page_counts_preemptible_cards_for_on_demand_work(alice_client, spot_fleet):
    from instances.selectors import capacity_by_region_model

    h800 = GpuModel.objects.get(slug="h800")
    region = Region.objects.get(slug="cn-north-1")
    cap = capacity_by_region_model()[(region.pk, h800.pk)]
    assert (cap["best"], cap["best_on_demand"]) == (0, 8)  # full, all of it interruptible


def test_the_detail_page_shows_the_tier_and_checkpoint_command(alice_client, spot_fleet):
    page = alice_client.get(reverse("instance_detail", args=[spot_fleet[0].pk]))
    assert "Interruptible" in page.content.decode()
    assert "python save.py 4" in page.content.decode()


# --- Clusters ------------------------------------------------------------------------------------------------


def test_an_on_demand_cluster_preempts_the_fewest_on_each_of_its_nodes(rich_alice, bob_rich, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    four_a, four_b, eight = (
        launch(rich_alice, gpu="a800-80g", count=4, tier=T.INTERRUPTIBLE),
        launch(rich_alice, gpu="a800-80g", count=4, tier=T.INTERRUPTIBLE),
        launch(rich_alice, gpu="a800-80g", count=8, tier=T.INTERRUPTIBLE),
    )
    assert {four_a.node_id, four_b.node_id} != {eight.node_id}
    cluster = launch(bob_rich, gpu="a800-80g", count=4, nodes=2)
    statuses = dict(Instance.objects.filter(owner=rich_alice).values_list("pk", "status"))
    assert statuses[eight.pk] == S.PREEMPTING
    assert sorted([statuses[four_a.pk], statuses[four_b.pk]]) == [S.PREEMPTING, S.RUNNING]  # one of the two
    assert cluster.status == S.PROVISIONING and cluster.displaced_others
    assert (
        sum(
            Node.objects.filter(gpu_model__slug="a800-80g", region__slug="cn-north-1").values_list(
                "free_cards", flat=True
            )
        )
        == 4
    )
    for victim in Instance.objects.filter(status=S.PREEMPTING):
        after_grace(victim)
    cluster.refresh_from_db()
    assert cluster.status == S.RUNNING
    assert len(set(cluster.node_names)) == 2


def test_an_on_demand_cluster_that_preemption_cannot_fit_preempts_nobody(rich_alice, bob_rich, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    settings.INSTANCES_MAX_NODES = 4
    launch(rich_alice, gpu="a800-80g", count=8, tier=T.INTERRUPTIBLE)
    with pytest.raises(NoCapacity):
        launch(bob_rich, gpu="a800-80g", count=8, nodes=4)  # cn-north-1 has two A800 nodes
    assert not Instance.objects.filter(status=S.PREEMPTING).exists()


def test_the_launch_form_launches_interruptible_with_a_checkpoint_command(rich_alice, alice_client):
    form = {
        "region": Region.objects.get(slug="cn-north-1").pk,
        "gpu_model": GpuModel.objects.get(slug="h800").pk,
        "gpu_count": 2,
        "image": Image.objects.first().pk,
        "disk_gb": 50,
        "name": "spot-from-the-page",
        "tier": "interruptible",
        "checkpoint_command": "python save.py /mnt/ckpt",
    }
    response = alice_client.post(reverse("instance_launch"), form)
    assert response.status_code == 302
    instance = Instance.objects.get(name="spot-from-the-page")
    assert (instance.tier, instance.checkpoint_command, instance.hourly_price_fen) == (
        T.INTERRUPTIBLE,
        "python save.py /mnt/ckpt",
        2 * 595,
    )
    bad = alice_client.post(reverse("instance_launch"), {**form, "tier": "free", "name": "x"})
    assert bad.status_code == 200 and not Instance.objects.filter(name="x").exists()
    assert "Select a valid choice" in bad.content.decode()
