"""Downsampling and retention: raw samples fold into 5-minute rollups (averages and peaks), a repeat
writes the same figures, late samples are counted, and old rows are dropped by the settings."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from metrics.models import CardRollup, CardSample
from metrics.services import metrics_maintain, metrics_prune, metrics_rollup
from metrics.tasks import metrics_maintain_task

INSTANCE = uuid.UUID("6f1c2a9b-03de-4f00-9000-000000000001")
T0 = datetime(2026, 12, 1, 4, 0, tzinfo=UTC)


def _sample(at: datetime, util: int | None, *, card: int = 0, memory: int = 1000, power: int = 100, temp: int = 40):
    return CardSample(
        instance_id=INSTANCE,
        at=at,
        card=card,
        utilization_pct=util,
        memory_used_mib=memory,
        memory_total_mib=81920,
        power_w=power,
        temperature_c=temp,
    )


@pytest.fixture
def ten_minutes(db):
    """Forty ticks from 04:00: utilisation 0, 10, 20 … 390 mod 100; memory rising."""
    CardSample.objects.bulk_create(
        _sample(T0 + timedelta(seconds=15 * i), (10 * i) % 100, memory=1000 + i, power=100 + i, temp=40 + i % 7)
        for i in range(40)
    )


def test_complete_buckets_fold_into_averages_and_peaks(ten_minutes):
    metrics_rollup(now=T0 + timedelta(minutes=10, seconds=3))
    rollups = list(CardRollup.objects.order_by("at"))
    assert [r.at for r in rollups] == [T0, T0 + timedelta(minutes=5)]
    first = rollups[0]
    utils = [(10 * i) % 100 for i in range(20)]
    assert first.samples == 20
    assert first.utilization_avg_pct == round(sum(utils) / 20)
    assert first.utilization_max_pct == 90
    assert first.memory_used_max_mib == 1019
    assert first.memory_total_mib == 81920
    assert first.power_avg_w == round(sum(100 + i for i in range(20)) / 20)
    assert first.temperature_max_c == 46


def test_the_bucket_in_progress_waits(ten_minutes):
    metrics_rollup(now=T0 + timedelta(minutes=7))
    assert list(CardRollup.objects.values_list("at", flat=True)) == [T0]


def test_a_repeat_writes_the_same_figures_and_late_samples_are_counted(ten_minutes):
    now = T0 + timedelta(minutes=10, seconds=3)
    metrics_rollup(now=now)
    before = list(CardRollup.objects.order_by("at").values())
    metrics_rollup(now=now)
    assert list(CardRollup.objects.order_by("at").values()) == before
    CardSample.objects.create(
        instance_id=INSTANCE, at=T0 + timedelta(seconds=7), card=1, utilization_pct=100, memory_total_mib=81920
    )
    metrics_rollup(now=now + timedelta(minutes=1))
    late = CardRollup.objects.get(at=T0, card=1)
    assert (late.samples, late.utilization_avg_pct) == (1, 100)
    assert CardRollup.objects.count() == 3


def test_unknown_utilisation_is_not_averaged_as_zero(db):
    CardSample.objects.bulk_create([_sample(T0, 80), _sample(T0 + timedelta(seconds=15), None)])
    metrics_rollup(now=T0 + timedelta(minutes=5))
    assert CardRollup.objects.get().utilization_avg_pct == 80


def test_old_raw_samples_and_old_rollups_are_dropped(db, settings):
    settings.METRICS_RAW_RETENTION_S = 3600
    settings.METRICS_ROLLUP_RETENTION_DAYS = 2
    now = T0 + timedelta(days=3)
    CardSample.objects.bulk_create(
        [
            _sample(now - timedelta(hours=2), 5),
            _sample(now - timedelta(minutes=50), 6),
            _sample(now - timedelta(minutes=1), 7),
        ]
    )
    CardRollup.objects.bulk_create(
        CardRollup(instance_id=INSTANCE, at=at, card=0, samples=20)
        for at in (now - timedelta(days=2, minutes=5), now - timedelta(days=1))
    )
    assert metrics_prune(now=now) == (1, 1)
    assert sorted(CardSample.objects.values_list("utilization_pct", flat=True)) == [6, 7]
    assert CardRollup.objects.get().at == now - timedelta(days=1)


def test_raw_samples_are_kept_until_they_were_rolled_up_whatever_the_setting(db, settings):
    settings.METRICS_RAW_RETENTION_S = 60  # shorter than the rollup's lookback
    now = T0 + timedelta(hours=1)
    CardSample.objects.bulk_create([_sample(now - timedelta(minutes=20), 5)])
    metrics_maintain(now=now)
    assert CardSample.objects.count() == 1
    assert CardRollup.objects.get().samples == 1


def test_the_periodic_task_rolls_up_and_prunes(db):
    assert metrics_maintain_task.apply().get() == {"rolled_up": 0, "raw_pruned": 0, "rollups_pruned": 0}
