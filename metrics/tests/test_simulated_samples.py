"""The simulated cloud's GPU series: the same figures for the same machine and tick, plausible ranges,
and idle stretches in a day."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from providers.simulated.gpus import MEMORY_MIB, simulated_sample, stretch_is_idle

KEY = "6f1c2a9b-03de-4f00-9000-000000000001"
DAY = datetime(2026, 12, 1, tzinfo=UTC)


def _day(key: str, card: int = 0):
    return [
        simulated_sample(key=key, card=card, at=DAY + timedelta(seconds=15 * i), gpu_model="h200") for i in range(5760)
    ]


def test_a_tick_gives_the_same_sample_every_time():
    at = DAY + timedelta(hours=3, seconds=45)
    assert simulated_sample(key=KEY, card=1, at=at, gpu_model="h200") == simulated_sample(
        key=KEY, card=1, at=at, gpu_model="h200"
    )


def test_figures_stay_within_what_a_card_can_show():
    for sample in _day(KEY):
        assert 0 <= sample.utilization_pct <= 100
        assert 0 <= sample.memory_used_mib <= sample.memory_total_mib == MEMORY_MIB["h200"]
        assert 0 < sample.power_w <= 700
        assert 25 <= sample.temperature_c <= 90


def test_a_day_has_idle_stretches_and_busy_ones():
    day = _day(KEY)
    idle = [s for s in day if s.utilization_pct < 5]
    assert 0.1 < len(idle) / len(day) < 0.5  # about one stretch in four
    busy = [s.utilization_pct for s in day if s.utilization_pct >= 5]
    assert min(busy) >= 40


def test_idle_stretches_last_twenty_minutes_and_hold_every_card():
    at = next(
        DAY + timedelta(minutes=20 * i) for i in range(72) if stretch_is_idle(KEY, DAY + timedelta(minutes=20 * i))
    )
    for card in range(8):
        for minute in (0, 7, 19):
            assert (
                simulated_sample(
                    key=KEY, card=card, at=at + timedelta(minutes=minute), gpu_model="a800-80g"
                ).utilization_pct
                <= 2
            )


def test_machines_differ():
    other = "0b7e5d1c-9a22-4f00-9000-000000000002"
    assert [s.utilization_pct for s in _day(KEY)[:240]] != [s.utilization_pct for s in _day(other)[:240]]
