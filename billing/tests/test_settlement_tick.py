from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.tests.factories import UserFactory
from billing.meter_arithmetic import amount_owed
from billing.models import Meter, Transaction
from billing.selectors import balance_get
from billing.services import ledger_check, meter_settle, meter_start, meter_stop, trial_claim
from billing.settlement import meters_settle_all
from billing.tests.helpers import gpu_sku, topup, usage_charged

T0 = timezone.now().replace(microsecond=0) - timedelta(days=1)


def test_a_tick_charges_open_meters_for_the_seconds_so_far(alice):
    trial_claim(user=alice)
    meter_start(user=alice, sku=gpu_sku(), quantity=2, ref="i:1", at=T0)
    report = meters_settle_all(now=T0 + timedelta(seconds=3601))
    meter = Meter.objects.get(ref="i:1")
    assert (meter.settled_seconds, meter.owed_fen, meter.charged_fen) == (3601, 380, 380)
    assert report.charged_fen == 380 and report.postings == 1
    assert balance_get(user=alice).trial == 620


def test_many_ticks_charge_a_run_its_exact_price(alice):
    topup(alice, 100_000)
    sku = gpu_sku(price_fen=777)
    meter_start(user=alice, sku=sku, quantity=3, ref="i:1", at=T0)
    for second in range(7, 4000, 61):  # ticks at odd moments: each posts a rounded difference
        meters_settle_all(now=T0 + timedelta(seconds=second, microseconds=second * 997 % 1_000_000))
    meter = meter_stop(ref="i:1", at=T0 + timedelta(seconds=4000, microseconds=500_000))
    exact = amount_owed(price_fen=777, quantity=3, unit_seconds=3600, seconds=4000)
    assert meter.charged_fen == exact == usage_charged(meter)
    assert balance_get(user=alice).cash == 100_000 - exact


def test_a_tick_repeated_at_the_same_moment_charges_nothing_more(alice):
    trial_claim(user=alice)
    meter_start(user=alice, sku=gpu_sku(), quantity=1, ref="i:1", at=T0)
    meters_settle_all(now=T0 + timedelta(hours=1))
    again = meters_settle_all(now=T0 + timedelta(hours=1))
    assert again.charged_fen == 0 and again.postings == 0
    assert Transaction.objects.filter(kind="usage").count() == 1


def test_trial_credit_is_spent_before_paid_money(alice):
    trial_claim(user=alice)  # 1000 fen
    topup(alice, 5000)
    meter_start(user=alice, sku=gpu_sku(price_fen=1200), quantity=1, ref="i:1", at=T0)
    meters_settle_all(now=T0 + timedelta(hours=1))
    assert balance_get(user=alice) == balance_get(user=alice).__class__(cash=4800, trial=0)


def test_what_the_balance_cannot_cover_stays_owed_and_is_collected_after_a_top_up(alice):
    trial_claim(user=alice)
    meter_start(user=alice, sku=gpu_sku(price_fen=1500), quantity=1, ref="i:1", at=T0)
    meters_settle_all(now=T0 + timedelta(hours=1))
    meter = Meter.objects.get(ref="i:1")
    assert (meter.owed_fen, meter.charged_fen) == (1500, 1000)
    assert balance_get(user=alice).total == 0
    meter_stop(ref="i:1", at=T0 + timedelta(hours=2))  # stopped while owing 2000 fen
    topup(alice, 10_000)
    meters_settle_all(now=T0 + timedelta(hours=3))
    meter.refresh_from_db()
    assert (meter.owed_fen, meter.charged_fen) == (3000, 3000)
    assert balance_get(user=alice).cash == 8000
    assert ledger_check().ok


def test_one_users_meters_share_the_balance_without_overdrawing(alice, charlie):
    trial_claim(user=alice)
    trial_claim(user=charlie)
    for i in range(3):
        meter_start(user=alice, sku=gpu_sku(price_fen=500), quantity=1, ref=f"a:{i}", at=T0)
    meter_start(user=charlie, sku=gpu_sku(price_fen=500), quantity=1, ref="c:0", at=T0)
    meters_settle_all(now=T0 + timedelta(hours=1))
    assert balance_get(user=alice).total == 0  # 1500 due, 1000 there
    assert sum(m.charged_fen for m in Meter.objects.filter(user=alice)) == 1000
    assert balance_get(user=charlie).trial == 500
    assert ledger_check().ok


def test_a_single_settle_and_a_tick_share_keys_and_never_double_charge(alice):
    trial_claim(user=alice)
    meter = meter_start(user=alice, sku=gpu_sku(), quantity=1, ref="i:1", at=T0)
    meter_settle(meter=meter, until=T0 + timedelta(minutes=30))
    meters_settle_all(now=T0 + timedelta(minutes=30))
    meters_settle_all(now=T0 + timedelta(minutes=60))
    meter.refresh_from_db()
    assert meter.charged_fen == 190 == usage_charged(meter)
    keys = list(Transaction.objects.filter(kind="usage").values_list("idempotency_key", flat=True))
    assert sorted(keys) == [f"usage:meter:{meter.pk}:0", f"usage:meter:{meter.pk}:95"]


def test_a_stop_reported_after_the_tick_passed_it_gives_back_the_extra_seconds(alice):
    trial_claim(user=alice)
    topup(alice, 10_000)
    meter_start(user=alice, sku=gpu_sku(price_fen=6000), quantity=1, ref="i:1", at=T0)
    meters_settle_all(now=T0 + timedelta(seconds=1200))  # 2000 fen: 1000 trial, then 1000 paid
    meter = meter_stop(ref="i:1", at=T0 + timedelta(seconds=1170))  # the stop happened 30 s earlier
    assert meter.stopped_at == T0 + timedelta(seconds=1170)
    assert meter.charged_fen == meter.owed_fen == 1950 == usage_charged(meter)
    assert balance_get(user=alice) == balance_get(user=alice).__class__(cash=10_000 - 950, trial=0)  # paid money back
    assert meter_stop(ref="i:1") is None
    meters_settle_all(now=T0 + timedelta(hours=1))
    meter.refresh_from_db()
    assert meter.charged_fen == 1950
    assert ledger_check().ok


def _open_meters(count: int) -> None:
    sku = gpu_sku()
    for i in range(count):
        user = UserFactory()
        trial_claim(user=user)
        meter_start(user=user, sku=sku, quantity=1, ref=f"q:{count}:{i}", at=T0)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="set-based on PostgreSQL only")
def test_a_tick_takes_as_many_queries_for_200_meters_as_for_10(db):
    counts = []
    for n, hours in ((10, 1), (200, 2)):
        _open_meters(n)
        meters_settle_all(now=T0 + timedelta(minutes=1))  # warm-up: system accounts exist, meters started
        Meter.objects.filter(ref__startswith="q:").exclude(ref__startswith=f"q:{n}:").update(
            stopped_at=T0 + timedelta(minutes=1)
        )  # only this round's meters stay open
        with CaptureQueriesContext(connection) as ctx:
            report = meters_settle_all(now=T0 + timedelta(hours=hours))
        assert report.meters == n and report.postings == n
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1] <= 10, counts
