"""The idle-waste line: per instance and day, the idle stretches of at least the minimum length (every
card below the threshold), split at midnight; summed per month on the statement at the hourly price."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.urls import reverse

from billing.statements import statement_get
from instances.tests.conftest import running
from metrics.models import CardRollup, IdleDay
from metrics.services import metrics_idle_days

TZ = ZoneInfo("Asia/Shanghai")
DAY = date(2026, 11, 10)


def _at(hour: int, minute: int, day: date = DAY) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=TZ)


def _buckets(instance, start: datetime, count: int, *, peak: int, cards: int = 1, busy_card: int | None = None):
    CardRollup.objects.bulk_create(
        CardRollup(
            instance_id=instance.pk,
            at=start + timedelta(minutes=5 * i),
            card=card,
            samples=20,
            utilization_avg_pct=peak,
            utilization_max_pct=80 if card == busy_card else peak,
        )
        for i in range(count)
        for card in range(cards)
    )


@pytest.fixture
def instance(rich_alice, settings):
    settings.TIME_ZONE = "Asia/Shanghai"
    settings.METRICS_IDLE_WASTE_MIN_MINUTES = 15
    return running(rich_alice)


def test_idle_stretches_of_the_minimum_length_count_and_midnight_splits_them(instance):
    _buckets(instance, _at(10, 0), 6, peak=1)  # 30 idle minutes
    _buckets(instance, _at(10, 30), 6, peak=90)  # busy
    _buckets(instance, _at(11, 0), 2, peak=0)  # 10 idle minutes: too short to count
    _buckets(instance, _at(23, 50), 6, peak=2)  # 23:50-00:20: 10 minutes today, 20 tomorrow
    metrics_idle_days(now=_at(12, 0, DAY + timedelta(days=1)), days=2)
    assert dict(IdleDay.objects.values_list("day", "idle_seconds")) == {DAY: 2400, DAY + timedelta(days=1): 1200}


def test_a_repeat_writes_the_same_days(instance):
    _buckets(instance, _at(10, 0), 6, peak=1)
    now = _at(18, 0)
    metrics_idle_days(now=now)
    metrics_idle_days(now=now)
    assert list(IdleDay.objects.values_list("day", "idle_seconds")) == [(DAY, 1800)]


def test_one_busy_card_makes_the_bucket_busy(rich_alice, settings):
    settings.TIME_ZONE = "Asia/Shanghai"
    instance = running(rich_alice, count=2)
    _buckets(instance, _at(10, 0), 6, peak=0, cards=2, busy_card=1)
    metrics_idle_days(now=_at(18, 0))
    assert not IdleDay.objects.exists()


def test_a_gap_breaks_the_stretch(instance):
    _buckets(instance, _at(10, 0), 2, peak=0)
    _buckets(instance, _at(10, 15), 2, peak=0)  # 10:10-10:15 missing: stopped, nothing sampled
    metrics_idle_days(now=_at(18, 0))
    assert not IdleDay.objects.exists()


def test_the_statement_shows_the_idle_spend_per_instance_at_its_hourly_price(instance, alice_client, charlie):
    IdleDay.objects.bulk_create(
        [
            IdleDay(instance_id=instance.pk, day=DAY, idle_seconds=2400),
            IdleDay(instance_id=instance.pk, day=DAY + timedelta(days=1), idle_seconds=1200),
            IdleDay(instance_id=instance.pk, day=date(2026, 12, 1), idle_seconds=9999),  # next month
        ]
    )
    statement = statement_get(user=instance.owner, month=date(2026, 11, 1))
    [line] = statement.idle_lines
    assert (line.name, line.idle_seconds) == (instance.name, 3600)
    assert line.amount_fen == instance.hourly_price_fen
    assert statement.idle_total_fen == instance.hourly_price_fen
    assert statement_get(user=charlie, month=date(2026, 11, 1)).idle_lines == []
    html = alice_client.get(reverse("billing_statement", args=["2026-11"])).content.decode()
    assert 'id="idle-waste"' in html and "below 5 % utilisation for 15 minutes" in html
    # Once, in the page's body: not in its <title> nor its header as well.
    assert html.count('id="idle-waste"') == 1
    assert "idle" not in html.split("<title>", 1)[1].split("</title>", 1)[0]
