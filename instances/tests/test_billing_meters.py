"""A running instance holds a GPU meter, a stopped one a disk meter, a released one none."""

from billing.models import Meter
from billing.selectors import balance_get
from instances.models import Instance
from instances.services import instance_release, instance_start, instance_stop
from instances.skus import disk_meter_ref, gpu_meter_ref
from instances.tests.conftest import committed, launch, running, simulate

S = Instance.Status


def _open(ref):
    return Meter.objects.filter(ref=ref, stopped_at__isnull=True).first()


def test_running_opens_a_gpu_meter_for_its_cards_at_the_model_price(rich_alice):
    instance = running(rich_alice, count=4)
    meter = _open(gpu_meter_ref(instance.pk))
    assert meter is not None
    assert meter.quantity == 4
    assert meter.price_fen == 190  # A800: ¥1.90 per card-hour
    assert meter.sku.code == "gpu.a800-80g"
    assert meter.started_at == instance.events.get(new=S.RUNNING).created_at
    assert _open(disk_meter_ref(instance.pk)) is None


def test_stopping_closes_the_gpu_meter_and_opens_a_disk_meter(rich_alice):
    instance = running(rich_alice, disk_gb=200)
    with committed():
        instance_stop(instance=instance)
    assert _open(gpu_meter_ref(instance.pk)) is None
    disk = _open(disk_meter_ref(instance.pk))
    assert disk.quantity == 200
    assert disk.sku.code == "disk.gb"
    assert disk.unit_seconds == 86400


def test_starting_again_closes_the_disk_meter_and_opens_a_new_gpu_meter(rich_alice):
    instance = running(rich_alice)
    with committed():
        instance_stop(instance=instance)
    instance.refresh_from_db()
    with committed():
        instance_start(instance=instance)
    assert _open(disk_meter_ref(instance.pk)) is None
    assert _open(gpu_meter_ref(instance.pk)) is not None
    assert Meter.objects.filter(ref=gpu_meter_ref(instance.pk)).count() == 2


def test_releasing_closes_every_meter(rich_alice):
    instance = running(rich_alice)
    with committed():
        instance_stop(instance=instance)
    instance.refresh_from_db()
    with committed():
        instance_release(instance=instance)
    assert not Meter.objects.filter(ref__startswith=f"instance:{instance.pk}", stopped_at__isnull=True).exists()


def test_a_failed_launch_costs_nothing(rich_alice):
    before = balance_get(user=rich_alice).total
    with simulate(FAIL_CREATE_PERMANENT=1), committed():
        instance = launch(rich_alice)
    instance.refresh_from_db()
    assert instance.status == S.FAILED
    assert not Meter.objects.filter(ref__startswith=f"instance:{instance.pk}").exists()
    assert balance_get(user=rich_alice).total == before


def test_a_price_change_in_the_catalogue_reprices_the_sku_for_the_next_meter(rich_alice):
    from instances.models import GpuModel

    first = running(rich_alice)
    GpuModel.objects.filter(slug="a800-80g").update(price_per_card_hour_fen=210)
    second = running(rich_alice)
    assert _open(gpu_meter_ref(first.pk)).price_fen == 190  # an open meter keeps its price
    assert _open(gpu_meter_ref(second.pk)).price_fen == 210
