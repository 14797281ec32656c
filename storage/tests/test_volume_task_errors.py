"""A volume task that raises what no one declared (a bug), or a transient error past its last retry,
settles its volume with the error as its reason: a volume never made fails and costs nothing, a resize
keeps the size that is billed, a deletion fails and can be asked for again."""

import pytest
from django.urls import reverse

from billing.models import Meter
from billing.services import balance_get
from instances.models import Region
from instances.tasks import RETRY
from instances.tests.conftest import committed, simulate
from providers import TransientBackendError
from providers.simulated.backend import SimulatedBug
from providers.simulated.models import SimulatedVolume
from storage import services
from storage.models import Volume
from storage.selectors import volume_meter_ref
from storage.tasks import volume_create_task
from storage.tests.conftest import make_volume

V = Volume.Status


def _create(user, **options):
    """Ask for a volume while the provider misbehaves as ``options`` say; its task raises."""
    with simulate(**options), pytest.raises((SimulatedBug, TransientBackendError)), committed():
        services.volume_create(user=user, region=Region.objects.get(slug="cn-north-1"), name="data", size_gb=100)
    return Volume.objects.get(name="data")


def _events(volume):
    return list(volume.events.values_list("old", "new"))


def test_a_create_that_raises_fails_the_volume_with_the_error_and_costs_nothing(rich_alice):
    balance = balance_get(user=rich_alice).total

    volume = _create(rich_alice, BUG_IN=["volume_create"])

    assert volume.status == V.FAILED
    assert volume.status_reason_text == "Internal error while creating: SimulatedBug: simulated bug in volume_create()"
    assert _events(volume) == [("", V.CREATING), (V.CREATING, V.FAILED)]
    assert not Meter.objects.filter(ref=volume_meter_ref(volume.pk)).exists()
    assert balance_get(user=rich_alice).total == balance
    assert not SimulatedVolume.objects.filter(key=volume.key).exists()


def test_the_reason_shows_on_the_page_and_in_the_api(rich_alice, client_for):
    volume = _create(rich_alice, BUG_IN=["volume_create"])
    client = client_for(rich_alice)

    page = client.get(reverse("volume_detail", args=[volume.pk])).content.decode()
    api = client.get(reverse("api-volume-detail", args=[volume.pk])).json()

    assert volume.status_reason_text in page and "Traceback" not in page
    assert (api["status"], api["status_reason"]) == ("failed", volume.status_reason_text)


def test_a_create_still_failing_after_its_last_retry_fails_the_volume(rich_alice):
    with committed():
        volume = services.volume_create(
            user=rich_alice, region=Region.objects.get(slug="cn-north-1"), name="data", size_gb=100
        )
    Volume.objects.filter(pk=volume.pk).update(status=V.CREATING)  # as if the provider never answered
    with simulate(UNREACHABLE=True), pytest.raises(TransientBackendError):
        volume_create_task.apply(args=[str(volume.pk)], retries=RETRY["max_retries"])
    volume.refresh_from_db()
    assert volume.status == V.FAILED
    assert volume.status_reason_text.endswith("(still failing after 9 attempts)")


def test_a_failing_create_delivered_twice_fails_the_volume_once(rich_alice):
    volume = _create(rich_alice, BUG_IN=["volume_create"])
    volume_create_task.apply(args=[str(volume.pk)])  # finds it failed: nothing to do
    assert volume.events.filter(new=V.FAILED).count() == 1


def test_a_resize_that_raises_keeps_the_size_that_is_billed(rich_alice):
    volume = make_volume(rich_alice, size_gb=100)

    with simulate(BUG_IN=["volume_resize"]), pytest.raises(SimulatedBug), committed():
        services.volume_resize(volume=volume, size_gb=200)

    volume.refresh_from_db()
    assert (volume.status, volume.size_gb, volume.resize_to_gb) == (V.AVAILABLE, 100, None)
    assert volume.status_reason_text == (
        "Internal error while resizing: SimulatedBug: simulated bug in volume_resize(). The size is unchanged."
    )
    [meter] = Meter.objects.filter(ref=volume_meter_ref(volume.pk))
    assert (meter.quantity, meter.stopped_at) == (100, None)


def test_a_delete_that_raises_fails_the_volume_and_deleting_again_finishes_it(rich_alice):
    volume = make_volume(rich_alice)

    with simulate(BUG_IN=["volume_destroy"]), pytest.raises(SimulatedBug), committed():
        services.volume_delete(volume=volume)

    volume.refresh_from_db()
    assert volume.status == V.FAILED
    assert volume.status_reason_text == (
        "Internal error while deleting: SimulatedBug: simulated bug in volume_destroy(). Delete it again to retry."
    )
    assert not Meter.objects.filter(ref=volume_meter_ref(volume.pk), stopped_at__isnull=True).exists()
    assert volume.can_delete()

    with committed():
        services.volume_delete(volume=volume)

    volume.refresh_from_db()
    assert volume.status == V.DELETED
    assert not SimulatedVolume.objects.filter(key=volume.key).exists()
    assert _events(volume)[-4:] == [
        (V.AVAILABLE, V.DELETING),
        (V.DELETING, V.FAILED),
        (V.FAILED, V.DELETING),
        (V.DELETING, V.DELETED),
    ]
