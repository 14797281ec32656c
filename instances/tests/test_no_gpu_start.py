"""No-GPU mode: a stopped instance started without cards (same disk and image, a small CPU/RAM allowance,
the no-GPU price), and back to its cards by a stop and a normal start."""

import pytest

from billing.models import Meter
from instances.errors import FundsTooLow, NoCapacity, NoGpuNotSupported, OperationNotAllowed
from instances.models import Instance, Node
from instances.services import instance_start, instance_stop
from instances.services.common import _spec
from instances.skus import disk_meter_ref, gpu_meter_ref
from instances.tests.conftest import committed, fund, launch, running
from providers.simulated.models import SimulatedMachine

S = Instance.Status


def _open(ref):
    return Meter.objects.filter(ref=ref, stopped_at__isnull=True).first()


def _free_cards() -> dict[str, int]:
    return dict(Node.objects.values_list("name", "free_cards"))


def _stopped(user, **kwargs) -> Instance:
    instance = running(user, **kwargs)
    with committed():
        instance_stop(instance=instance)
    instance.refresh_from_db()
    assert instance.status == S.STOPPED
    return instance


def _start(instance, **kwargs) -> Instance:
    with committed():
        instance_start(instance=instance, **kwargs)
    instance.refresh_from_db()
    return instance


def test_a_no_gpu_start_runs_it_holding_no_cards_billed_at_the_no_gpu_price(rich_alice, settings):
    settings.INSTANCES_NO_GPU_PRICE_FEN_PER_HOUR = 12
    instance = _stopped(rich_alice, count=4, disk_gb=100)
    before = _free_cards()
    instance = _start(instance, no_gpu=True)
    assert instance.status == S.RUNNING
    assert instance.no_gpu is True
    assert instance.gpu_count == 4  # kept for the next GPU start
    assert instance.cards_held == 0
    assert instance.node is not None and instance.node.region_id == instance.region_id
    assert _free_cards() == before
    assert SimulatedMachine.objects.get(key=instance.key).cards == 0
    meter = _open(gpu_meter_ref(instance.pk))
    assert (meter.sku.code, meter.price_fen, meter.quantity, meter.unit_seconds) == ("instance.no_gpu", 12, 1, 3600)
    assert _open(disk_meter_ref(instance.pk)) is None  # as any running instance: its disk is in the run's price


def test_its_machine_gets_the_cpu_allowance_and_no_cards(rich_alice, settings):
    settings.INSTANCES_NO_GPU_CPUS, settings.INSTANCES_NO_GPU_MEMORY_GB = 0.5, 2
    instance = _start(_stopped(rich_alice, count=8), no_gpu=True)
    spec = _spec(Instance.objects.select_related("gpu_model", "image", "region", "node").get(pk=instance.pk))
    assert (spec.gpu_count, spec.cpus, spec.memory_gb) == (0, 0.5, 2)


def test_a_stop_then_a_normal_start_takes_the_cards_and_the_gpu_meter_again(rich_alice):
    instance = _start(_stopped(rich_alice, count=4), no_gpu=True)
    with committed():
        instance_stop(instance=instance)
    instance.refresh_from_db()
    assert instance.status == S.STOPPED
    assert sum(_free_cards().values()) == 4 * 8  # nothing was held, nothing given back twice
    instance = _start(instance)
    assert instance.status == S.RUNNING
    assert instance.no_gpu is False
    assert sum(_free_cards().values()) == 4 * 8 - 4
    assert SimulatedMachine.objects.get(key=instance.key).cards == 4
    meter = _open(gpu_meter_ref(instance.pk))
    assert (meter.sku.code, meter.quantity, meter.price_fen) == ("gpu.a800-80g", 4, 190)
    codes = list(Meter.objects.filter(ref=gpu_meter_ref(instance.pk)).order_by("started_at").values_list("sku__code"))
    assert codes == [("gpu.a800-80g",), ("instance.no_gpu",), ("gpu.a800-80g",)]


def test_it_needs_no_gpu_quota(rich_alice, settings):
    instance = _stopped(rich_alice, count=8)
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 0
    assert _start(instance, no_gpu=True).status == S.RUNNING


def test_the_balance_is_checked_at_the_no_gpu_price(alice, catalogue, settings):
    fund(alice, 150)  # ¥1.50: ten minutes of 4 A800s (¥1.27) at launch
    instance = _stopped(alice, count=4)
    settings.BILLING_MIN_RUNWAY_S = 3600  # now an hour must be covered: ¥7.60 with cards
    settings.INSTANCES_NO_GPU_PRICE_FEN_PER_HOUR = 1000
    with pytest.raises(FundsTooLow):
        instance_start(instance=instance, no_gpu=True)
    settings.INSTANCES_NO_GPU_PRICE_FEN_PER_HOUR = 10
    with pytest.raises(FundsTooLow):
        instance_start(instance=instance)
    assert _start(instance, no_gpu=True).status == S.RUNNING


def test_a_cluster_is_refused_and_stays_stopped(rich_alice):
    instance = _stopped(rich_alice, count=4, nodes=2)
    with pytest.raises(NoGpuNotSupported) as exc:
        instance_start(instance=instance, no_gpu=True)
    assert "cluster" in exc.value.message
    instance.refresh_from_db()
    assert instance.status == S.STOPPED


def test_a_running_instance_with_cards_is_refused(rich_alice):
    instance = running(rich_alice)
    with pytest.raises(OperationNotAllowed) as exc:
        instance_start(instance=instance, no_gpu=True)
    assert "stopped" in exc.value.message
    instance.refresh_from_db()
    assert (instance.status, instance.no_gpu) == (S.RUNNING, False)


def test_asking_twice_starts_it_once(rich_alice):
    instance = _stopped(rich_alice)
    with committed():
        instance_start(instance=instance, no_gpu=True)
        instance.refresh_from_db()
        instance_start(instance=instance, no_gpu=True)
    instance.refresh_from_db()
    assert instance.status == S.RUNNING
    assert instance.events.filter(new=S.STARTING).count() == 1


def test_its_cards_count_against_no_quota_while_it_runs_without_them(rich_alice, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 8
    _start(_stopped(rich_alice, count=8), no_gpu=True)
    assert running(rich_alice, count=8).status == S.RUNNING


def test_an_interruptible_run_without_gpu_is_never_preempted_for_cards_it_does_not_hold(rich_alice, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    spot = _start(_stopped(rich_alice, count=8, region="cn-east-1", tier=Instance.Tier.INTERRUPTIBLE), no_gpu=True)
    assert spot.status == S.RUNNING
    assert running(rich_alice, count=8, region="cn-east-1").status == S.RUNNING  # the node's free cards
    with pytest.raises(NoCapacity):
        launch(rich_alice, count=8, region="cn-east-1")
    spot.refresh_from_db()
    assert spot.status == S.RUNNING


def test_every_second_without_gpu_is_billed_once_at_the_no_gpu_price(rich_alice, settings):
    from instances.services import instance_release
    from instances.tests.test_usage_audit import _ran_for
    from instances.usage_audit import usage_audit

    settings.INSTANCES_NO_GPU_PRICE_FEN_PER_HOUR = 360  # 1 fen per 10 s
    instance = _start(_stopped(rich_alice, count=2), no_gpu=True)
    _ran_for(instance, 600)
    with committed():
        instance_release(instance=instance)
    meter = Meter.objects.get(ref=gpu_meter_ref(instance.pk), sku__code="instance.no_gpu")
    assert 600 <= meter.settled_seconds <= 601
    assert meter.owed_fen == 60
    audit = usage_audit(instances=Instance.objects.filter(pk=instance.pk))
    assert audit.problems == [] and audit.stretches == 2


def test_a_run_without_gpu_whose_node_fails_moves_on_without_taking_cards(rich_alice, settings):
    from instances.reconciler import instances_reconcile
    from instances.tests.conftest import backends
    from providers import get_backend

    settings.PROVISIONING_BACKENDS = backends(DISK_FOLLOWS=True)
    instance = _start(_stopped(rich_alice, count=8), no_gpu=True)
    old = instance.node.name
    get_backend("default").node_lose(name=old)
    with committed():
        instances_reconcile()
    instance.refresh_from_db()
    assert instance.status == S.RUNNING and instance.no_gpu
    assert instance.node.name != old
    assert sum(Node.objects.filter(is_healthy=True).values_list("free_cards", flat=True)) == sum(
        Node.objects.filter(is_healthy=True).values_list("total_cards", flat=True)
    )


def test_a_run_without_gpu_that_waits_for_a_node_comes_back_without_gpu(rich_alice, settings):
    from instances.capacity.preemption import instances_requeue
    from instances.reconciler import instances_reconcile
    from instances.tests.conftest import backends
    from providers import get_backend
    from providers.simulated.models import SimulatedNode

    settings.PROVISIONING_BACKENDS = backends(DISK_FOLLOWS=True)
    instance = _start(_stopped(rich_alice, count=8), no_gpu=True)
    region_nodes = list(Node.objects.filter(region=instance.region).values_list("name", flat=True))
    for name in region_nodes:  # the whole region fails: nowhere to move it, so it waits
        get_backend("default").node_lose(name=name)
    with committed():
        instances_reconcile()
    instance.refresh_from_db()
    assert instance.status == S.PREEMPTED

    # The region is back; the machine is off, its disk kept (the engine did not requeue it itself): the
    # console's own requeue starts it.
    SimulatedNode.objects.filter(name__in=region_nodes).update(is_lost=False)
    SimulatedMachine.objects.filter(key=instance.key).update(power="off")
    with committed():
        instances_reconcile()
        instances_requeue()
    instance.refresh_from_db()
    assert instance.status in (S.STARTING, S.RUNNING)
    assert instance.no_gpu and instance.cards_held == 0
    assert any("restarting after preemption" in e.reason_text for e in instance.events.all())
    assert _free_cards() == dict(Node.objects.values_list("name", "total_cards"))
