"""A volume is billed per GB-day from when the provider has made it until its deletion is asked for, at
the size the provider has, to the fen, however many settlement ticks ran in between; money is neither
made nor lost, and running out of it does not take a user's files away."""

from __future__ import annotations

import pytest

from billing.models import Meter
from billing.services import balance_get, ledger_check
from billing.settlement import meters_settle_all
from billing.tests.helpers import usage_charged
from instances.tests.conftest import committed
from storage import services
from storage.selectors import volume_meter_ref
from storage.tests.conftest import make_volume


@pytest.fixture(autouse=True)
def price(settings):
    settings.STORAGE_VOLUME_PRICE_FEN_PER_GB_DAY = 3


def _meters(volume):
    return list(Meter.objects.filter(ref=volume_meter_ref(volume.pk)).order_by("started_at", "id"))


def test_a_volume_is_billed_its_size_times_the_days_exactly(rich_alice, clock):
    before = balance_get(user=rich_alice).total
    volume = make_volume(rich_alice, size_gb=100)
    clock.advance(days=1, hours=7)
    meters_settle_all(now=clock.now)  # a tick on the way settles part of it; the total is unchanged
    clock.advance(days=1, hours=17)
    with committed():
        services.volume_delete(volume=volume)

    [meter] = _meters(volume)
    assert (meter.quantity, meter.price_fen, meter.unit_seconds) == (100, 3, 86400)
    assert meter.sku.code == "volume-gb-day" and meter.sku.is_storage
    assert meter.stopped_at - meter.started_at == clock.now - volume.events.get(new="available").created_at
    assert usage_charged(meter) == 100 * 3 * 3 == 900
    assert balance_get(user=rich_alice).total == before - 900
    assert ledger_check().ok


def test_a_resize_closes_the_meter_and_opens_one_at_the_new_size_at_the_same_instant(rich_alice, clock):
    before = balance_get(user=rich_alice).total
    volume = make_volume(rich_alice, size_gb=100)
    clock.advance(days=1)
    with committed():
        services.volume_resize(volume=volume, size_gb=300)
    volume.refresh_from_db()
    clock.advance(days=2)
    meters_settle_all(now=clock.now)
    with committed():
        services.volume_delete(volume=volume)

    small, large = _meters(volume)
    assert (small.quantity, large.quantity) == (100, 300)
    assert small.stopped_at == large.started_at
    assert usage_charged(small) == 100 * 3 * 1
    assert usage_charged(large) == 300 * 3 * 2
    assert balance_get(user=rich_alice).total == before - 2100
    assert ledger_check().ok


def test_a_resize_in_flight_is_billed_at_the_old_size_until_the_provider_has_grown_it(rich_alice, clock):
    volume = make_volume(rich_alice, size_gb=100)
    services.volume_resize(volume=volume, size_gb=200)  # not committed: the task has not run
    [meter] = _meters(volume)
    assert meter.is_open and meter.quantity == 100


def test_nothing_is_billed_while_creating_or_after_deletion_is_asked(rich_alice, clock):
    from instances.models import Region

    volume = services.volume_create(
        user=rich_alice, region=Region.objects.get(slug="cn-north-1"), name="pending", size_gb=50
    )
    assert _meters(volume) == []
    volume = make_volume(rich_alice, size_gb=50)
    with committed():
        services.volume_delete(volume=volume)
    clock.advance(days=5)
    meters_settle_all(now=clock.now)
    [meter] = _meters(volume)
    assert usage_charged(meter) == 0


def test_running_out_of_money_keeps_volumes_and_their_meter(rich_alice):
    from instances.services import instances_stop_for_funds

    volume = make_volume(rich_alice, size_gb=100)
    instances_stop_for_funds(user_id=rich_alice.pk)
    volume.refresh_from_db()
    assert volume.status == "available"
    assert _meters(volume)[0].is_open


def test_the_page_shows_the_cost_per_day_and_this_month(rich_alice, clock):
    from storage.selectors import volume_costs

    clock.now = clock.now.replace(day=3, hour=12)
    volume = make_volume(rich_alice, size_gb=100)
    clock.advance(days=2)
    cost = volume_costs(volumes=[volume], now=clock.now)[volume.pk]
    assert cost.per_day_fen == 300
    assert cost.month_fen == 600
