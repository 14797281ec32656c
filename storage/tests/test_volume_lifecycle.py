"""A volume's life on the simulated cloud: created by a worker, grown, deleted; every move in the table,
each task safe to run twice, the provider's refusals shown with why."""

from __future__ import annotations

import pytest
from django.test import override_settings

from core.statemachine import InvalidTransition
from instances.models import Region
from instances.tests.conftest import backends, committed
from providers import get_backend
from providers.simulated.models import SimulatedVolume
from storage import services
from storage.models import Volume
from storage.selectors import volume_meter_ref
from storage.services import ALLOWED, volume_transition
from storage.tests.conftest import make_volume

V = Volume.Status


def _events(volume):
    return list(volume.events.values_list("old", "new"))


def test_every_status_has_a_row_in_the_table_and_deleted_is_final():
    assert set(ALLOWED) == set(V.values)
    assert ALLOWED[V.DELETED] == frozenset()
    # Billing opens only from creating/resizing into available and closes only into deleting.
    assert {src for src, dsts in ALLOWED.items() if V.AVAILABLE in dsts} == {V.CREATING, V.RESIZING}


def test_a_move_outside_the_table_is_a_programming_error(rich_alice):
    volume = make_volume(rich_alice)
    with pytest.raises(InvalidTransition):
        volume_transition(volume_id=volume.pk, src=V.AVAILABLE, dst=V.CREATING)


def test_a_stale_move_does_nothing(rich_alice):
    volume = make_volume(rich_alice)
    assert volume_transition(volume_id=volume.pk, src=V.RESIZING, dst=V.AVAILABLE) is False
    assert volume.events.count() == 2


def test_created_by_a_worker_at_the_provider_under_its_key(rich_alice):
    volume = make_volume(rich_alice, size_gb=100, name="datasets")
    assert volume.status == V.AVAILABLE
    assert _events(volume) == [("", V.CREATING), (V.CREATING, V.AVAILABLE)]
    made = SimulatedVolume.objects.get(key=volume.key)
    assert made.size_gb == 100
    assert volume.backend_state == {"v": 1, "volume": made.pk, "size_gb": 100}


def test_creating_twice_makes_one_volume_at_the_provider(rich_alice):
    volume = make_volume(rich_alice)
    Volume.objects.filter(pk=volume.pk).update(status=V.CREATING)  # as if the task were redelivered
    services.volume_create_execute(volume_id=volume.pk)
    services.volume_create_execute(volume_id=volume.pk)
    assert SimulatedVolume.objects.filter(key=volume.key).count() == 1


def test_a_provider_refusal_fails_the_volume_with_why_and_bills_nothing(rich_alice, settings):
    settings.PROVISIONING_BACKENDS = backends(FAIL_VOLUME_CREATE=1)
    volume = make_volume(rich_alice)
    assert volume.status == V.FAILED
    assert "could not allocate" in volume.status_reason_text
    from billing.models import Meter

    assert not Meter.objects.filter(ref=volume_meter_ref(volume.pk)).exists()


def test_an_unreachable_provider_leaves_it_creating_and_the_periodic_task_finishes_it(rich_alice, settings):
    from billing.models import Meter

    settings.PROVISIONING_BACKENDS = backends(UNREACHABLE=True)
    region = Region.objects.get(slug="cn-north-1")
    with pytest.raises(Exception, match="did not answer"), committed():
        volume = services.volume_create(user=rich_alice, region=region, name="later", size_gb=10)
    volume = Volume.objects.get(name="later")
    assert volume.status == V.CREATING
    settings.PROVISIONING_BACKENDS = backends()
    settings.INSTANCES_REDRIVE_AFTER_S = 0
    with committed():
        report = services.volumes_refresh()
    volume.refresh_from_db()
    assert report["redriven"] == 1
    assert volume.status == V.AVAILABLE
    assert Meter.objects.filter(ref=volume_meter_ref(volume.pk), stopped_at__isnull=True).count() == 1


def test_resize_grows_it_at_the_provider(rich_alice):
    volume = make_volume(rich_alice, size_gb=100)
    with committed():
        services.volume_resize(volume=volume, size_gb=250)
    volume.refresh_from_db()
    assert (volume.status, volume.size_gb, volume.resize_to_gb) == (V.AVAILABLE, 250, None)
    assert SimulatedVolume.objects.get(key=volume.key).size_gb == 250
    assert volume.events.last().reason_text == "Resized from 100 to 250 GB"


@pytest.mark.parametrize("size", [100, 50, 0])
def test_resize_only_grows(rich_alice, size):
    volume = make_volume(rich_alice, size_gb=100)
    with pytest.raises(services.VolumeInvalid) as refused:
        services.volume_resize(volume=volume, size_gb=size)
    assert refused.value.field == "size_gb"
    volume.refresh_from_db()
    assert (volume.status, volume.size_gb) == (V.AVAILABLE, 100)


def test_the_provider_refusing_to_grow_it_keeps_the_old_size(rich_alice):
    volume = make_volume(rich_alice, size_gb=100)
    SimulatedVolume.objects.filter(key=volume.key).delete()  # lost at the provider
    with committed():
        services.volume_resize(volume=volume, size_gb=200)
    volume.refresh_from_db()
    assert (volume.status, volume.size_gb, volume.resize_to_gb) == (V.AVAILABLE, 100, None)
    assert "Resize failed" in volume.status_reason_text


def test_delete_removes_it_at_the_provider_and_twice_is_harmless(rich_alice):
    volume = make_volume(rich_alice)
    with committed():
        services.volume_delete(volume=volume)
        services.volume_delete(volume=volume)
    volume.refresh_from_db()
    assert volume.status == V.DELETED
    assert not SimulatedVolume.objects.filter(key=volume.key).exists()
    assert _events(volume)[-2:] == [(V.AVAILABLE, V.DELETING), (V.DELETING, V.DELETED)]
    services.volume_delete_execute(volume_id=volume.pk)  # a redelivered task
    assert volume.events.count() == 4


def test_a_deleted_volume_frees_its_name(rich_alice):
    volume = make_volume(rich_alice, name="scratch")
    with pytest.raises(services.VolumeInvalid):
        make_volume(rich_alice, name="scratch")
    with committed():
        services.volume_delete(volume=volume)
    assert make_volume(rich_alice, name="scratch").status == V.AVAILABLE


def test_the_storage_quota_counts_every_volume_and_pending_resizes(rich_alice, settings):
    settings.STORAGE_VOLUME_QUOTA_GB = 300
    first = make_volume(rich_alice, size_gb=200)
    with pytest.raises(services.StorageQuotaExceeded):
        make_volume(rich_alice, size_gb=101)
    make_volume(rich_alice, size_gb=100)
    with pytest.raises(services.StorageQuotaExceeded):
        services.volume_resize(volume=first, size_gb=201)


def test_a_volume_needs_the_balance_for_the_minimum_runway(alice, catalogue):
    with pytest.raises(services.FundsTooLow):
        services.volume_create(user=alice, region=Region.objects.get(slug="cn-north-1"), name="x", size_gb=1000)
    assert not Volume.objects.exists()


def test_a_region_whose_backend_has_no_volumes_is_refused(rich_alice, settings):
    settings.PROVISIONING_BACKENDS = backends(VOLUMES=False)
    assert not get_backend("default").supports_volumes
    with pytest.raises(services.VolumeInvalid) as refused:
        make_volume(rich_alice)
    assert refused.value.field == "region"


@override_settings(STORAGE_VOLUME_MAX_GB=1000)
@pytest.mark.parametrize("size", [0, -1, 1001])
def test_sizes_outside_the_limits_are_refused(rich_alice, size):
    with pytest.raises(services.VolumeInvalid):
        make_volume(rich_alice, size_gb=size)


def test_usage_is_measured_by_the_periodic_task(rich_alice):
    volume = make_volume(rich_alice)
    get_backend("default").volume_write(key=volume.key, used_bytes=5 * 1024**3)
    services.volumes_refresh()
    volume.refresh_from_db()
    assert volume.used_bytes == 5 * 1024**3
    assert volume.usage_checked_at is not None
    assert volume.used_percent == 5.0
