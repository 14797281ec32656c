"""The chart series, through the API the instance page reads: aligned to one time axis, gaps as null,
a week from the rollups, the owner's only, and documented in the schema."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from instances.tests.conftest import running
from metrics.models import CardRollup, CardSample
from metrics.selectors import instance_series, series_source

NOW = datetime(2026, 12, 1, 5, 0, 7, tzinfo=UTC)


@pytest.fixture
def instance(rich_alice):
    return running(rich_alice, count=2)


def _samples(instance, *, start: datetime, ticks: int, skip: set[int] = frozenset()):
    CardSample.objects.bulk_create(
        CardSample(
            instance_id=instance.pk,
            at=start + timedelta(seconds=15 * i),
            card=card,
            utilization_pct=10 * card + i % 10,
            memory_used_mib=1024 * (card + 1),
            memory_total_mib=81920,
            power_w=200 + card,
            temperature_c=50 + card,
        )
        for i in range(ticks)
        for card in (0, 1)
        if i not in skip
    )


def test_an_hour_has_a_point_per_tick_and_gaps_stay_null(instance):
    start = datetime(2026, 12, 1, 4, 59, 0, tzinfo=UTC)
    _samples(instance, start=start, ticks=5, skip={2})
    series = instance_series(instance_id=instance.pk, range_key="1h", now=NOW)
    assert series["step_s"] == 15 and series["source"] == "raw"
    assert len(series["t"]) == 240
    assert series["t"][-1] == int(datetime(2026, 12, 1, 5, 0, 0, tzinfo=UTC).timestamp())
    card1 = series["cards"][1]
    assert card1["card"] == 1 and card1["memory_total_mib"] == 81920
    assert card1["utilization_pct"][-5:] == [10, 11, None, 13, 14]
    assert card1["memory_used_mib"][-1] == 2048
    assert card1["utilization_pct"][:-5] == [None] * 235


def test_six_hours_average_each_minute(instance):
    _samples(instance, start=datetime(2026, 12, 1, 4, 58, tzinfo=UTC), ticks=4)
    series = instance_series(instance_id=instance.pk, range_key="6h", now=NOW)
    assert series["step_s"] == 60 and len(series["t"]) == 360
    assert series["cards"][0]["utilization_pct"][-3] == round((0 + 1 + 2 + 3) / 4)


def test_a_day_reads_the_rollups_and_the_raw_tail_they_have_not_reached(instance):
    assert series_source("1d") == "rollup"
    CardRollup.objects.create(
        instance_id=instance.pk,
        at=datetime(2026, 12, 1, 4, 40, tzinfo=UTC),
        card=0,
        samples=20,
        utilization_avg_pct=30,
        memory_total_mib=81920,
    )
    # Raw rows of that bucket (already rolled up: not counted twice), and of the tail (not yet rolled up).
    CardSample.objects.create(
        instance_id=instance.pk, at=datetime(2026, 12, 1, 4, 40, 15, tzinfo=UTC), card=0, utilization_pct=0
    )
    CardSample.objects.bulk_create(
        CardSample(
            instance_id=instance.pk,
            at=datetime(2026, 12, 1, 4, 56, tzinfo=UTC) + timedelta(seconds=15 * i),
            card=0,
            utilization_pct=70,
        )
        for i in range(4)
    )
    series = instance_series(instance_id=instance.pk, range_key="1d", now=NOW)
    assert series["step_s"] == 300 and len(series["t"]) == 288
    points = dict(zip(series["t"], series["cards"][0]["utilization_pct"], strict=True))
    assert points[int(datetime(2026, 12, 1, 4, 40, tzinfo=UTC).timestamp())] == 30
    assert points[int(datetime(2026, 12, 1, 4, 55, tzinfo=UTC).timestamp())] == 70
    assert sum(v is not None for v in points.values()) == 2


def test_a_week_reads_the_rollups(instance):
    assert series_source("7d") == "rollup"
    CardRollup.objects.bulk_create(
        CardRollup(
            instance_id=instance.pk,
            at=datetime(2026, 11, 28, 12, 0, tzinfo=UTC) + timedelta(minutes=5 * i),
            card=0,
            samples=20,
            utilization_avg_pct=util,
            utilization_max_pct=100,
            memory_used_max_mib=4096,
            memory_total_mib=81920,
            power_avg_w=300,
            temperature_max_c=70,
        )
        for i, util in enumerate([60, 0, 90, 30, 60, 0])
    )
    series = instance_series(instance_id=instance.pk, range_key="7d", now=NOW)
    assert series["step_s"] == 1800 and len(series["t"]) == 336
    values = [v for v in series["cards"][0]["utilization_pct"] if v is not None]
    assert values == [40]  # six 5-minute buckets, equally weighted, in one half hour


def test_the_api_serves_the_owner(instance, alice_client):
    _samples(instance, start=timezone.now() - timedelta(minutes=2), ticks=4)
    response = alice_client.get(reverse("api-instance-metrics", args=[instance.pk]), {"range": "15m"})
    assert response.status_code == 200
    body = response.json()
    assert body["range"] == "15m" and body["step_s"] == 15 and len(body["t"]) == 60
    assert [card["card"] for card in body["cards"]] == [0, 1]
    first = body["cards"][0]
    assert set(first) == {"card", "memory_total_mib", "utilization_pct", "memory_used_mib", "power_w", "temperature_c"}
    assert len(first["power_w"]) == 60 and [v for v in first["power_w"] if v is not None] == [200] * 4


def test_a_stranger_gets_404(instance, charlie_client):
    response = charlie_client.get(reverse("api-instance-metrics", args=[instance.pk]))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_an_unknown_range_is_a_400_in_the_api_error_format(instance, alice_client):
    response = alice_client.get(reverse("api-instance-metrics", args=[instance.pk]), {"range": "1y"})
    assert response.status_code == 400
    assert response.json()["error"]["fields"]["range"]


def test_the_endpoint_is_in_the_openapi_schema(alice_client):
    schema = alice_client.get(reverse("api-schema"), HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/api/v1/instances/{id}/metrics/"]["get"]
    assert operation["summary"] == "GPU metrics of an instance"
    assert [p["name"] for p in operation["parameters"] if p["in"] == "query"] == ["range"]
