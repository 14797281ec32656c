from datetime import timedelta

from django.utils import timezone

from billing.selectors import balance_get, runway_get
from billing.services import InsufficientFunds, launch_check, meter_start, meter_stop, sku_upsert, trial_claim


def _gpu_sku():
    return sku_upsert(code="gpu.a800", name="A800 80GB", unit="card-hour", price_fen=190, unit_seconds=3600)


def test_a_stopped_meter_is_charged_to_the_second(alice):
    trial_claim(user=alice)
    start = timezone.now() - timedelta(hours=2)
    meter_start(user=alice, sku=_gpu_sku(), quantity=2, ref="instance:1", at=start)
    meter = meter_stop(ref="instance:1", at=start + timedelta(seconds=3601))
    # 2 cards × ¥1.90/h × 3601 s = 380.105... fen → 380
    assert meter.charged_fen == 380
    assert balance_get(user=alice).trial == 1000 - 380


def test_starting_twice_opens_one_meter_and_stopping_twice_charges_once(alice):
    trial_claim(user=alice)
    sku = _gpu_sku()
    start = timezone.now() - timedelta(hours=1)
    first = meter_start(user=alice, sku=sku, quantity=1, ref="instance:2", at=start)
    assert meter_start(user=alice, sku=sku, quantity=1, ref="instance:2").pk == first.pk
    meter_stop(ref="instance:2", at=start + timedelta(hours=1))
    assert meter_stop(ref="instance:2") is None
    assert balance_get(user=alice).trial == 1000 - 190


def test_usage_beyond_the_balance_stays_owed_not_overdrawn(alice):
    trial_claim(user=alice)
    start = timezone.now() - timedelta(hours=10)
    meter = meter_start(user=alice, sku=_gpu_sku(), quantity=8, ref="instance:3", at=start)
    meter = meter_stop(ref="instance:3", at=start + timedelta(hours=1))
    assert meter.charged_fen == 1000  # all it had; 520 fen stay owed on the meter
    assert balance_get(user=alice).total == 0


def test_a_launch_needs_ten_minutes_of_balance(alice):
    with_nothing = runway_get(user=alice)
    assert with_nothing.seconds is None
    try:
        launch_check(user=alice, extra_hourly_fen=190)
    except InsufficientFunds as exc:
        assert "10 minutes" in str(exc)
    else:
        raise AssertionError("a launch with no balance must be refused")
    trial_claim(user=alice)
    launch_check(user=alice, extra_hourly_fen=190)  # ¥10 covers ¥1.90/h for 10 minutes
