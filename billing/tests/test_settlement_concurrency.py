"""Real threads on PostgreSQL: ticks that overlap each other and a stop never charge twice."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from accounts.tests.factories import UserFactory
from billing.hooks import out_of_funds
from billing.meter_arithmetic import amount_owed
from billing.models import Meter, Transaction
from billing.services import ledger_check, meter_start, meter_stop, trial_claim
from billing.settlement import meters_settle_all
from billing.tests.helpers import gpu_sku, topup, usage_charged
from core.testing import race

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks and SKIP LOCKED are PostgreSQL's"),
]

T0 = timezone.now().replace(microsecond=0) - timedelta(days=1)


def _run_together(*jobs) -> list[str]:
    """Start every job at the same moment on its own connection; return what they raised."""
    return race(lambda k: jobs[k](), threads=len(jobs), timeout=60).errors


def _meters(users: int = 30, per_user: int = 2) -> list[Meter]:
    sku = gpu_sku(price_fen=600)
    meters = []
    for u in range(users):
        user = UserFactory()
        trial_claim(user=user)
        if u % 2:
            topup(user, 5000)
        for i in range(per_user):
            meters.append(meter_start(user=user, sku=sku, quantity=1 + i, ref=f"c:{u}:{i}", at=T0))
    return meters


def _assert_no_double_charge(meters) -> None:
    for meter in meters:
        meter.refresh_from_db()
        assert usage_charged(meter) == meter.charged_fen <= meter.owed_fen
    assert ledger_check().ok


def test_two_ticks_at_once_charge_each_meter_once():
    meters = _meters()
    now = T0 + timedelta(minutes=30)
    errors = _run_together(lambda: meters_settle_all(now=now), lambda: meters_settle_all(now=now, batch_size=7))
    assert errors == []
    meters_settle_all(now=now)  # whatever either skipped is settled now, and nothing more
    _assert_no_double_charge(meters)
    for meter in meters:
        assert meter.settled_seconds == 1800
        assert meter.owed_fen == amount_owed(price_fen=600, quantity=meter.quantity, unit_seconds=3600, seconds=1800)


def test_four_ticks_at_different_moments_never_double_charge():
    meters = _meters(users=20)
    errors = _run_together(
        *[lambda s=s: meters_settle_all(now=T0 + timedelta(seconds=s)) for s in (600, 601, 900, 1200)]
    )
    assert errors == []
    _assert_no_double_charge(meters)


def test_a_tick_concurrent_with_stops_charges_each_run_its_exact_price():
    meters = _meters(users=10, per_user=1)
    for meter in meters:
        topup(meter.user, 100_000)
    stop_at = T0 + timedelta(seconds=1234)

    def stop_all():
        for meter in meters:
            meter_stop(ref=meter.ref, at=stop_at)

    # The tick runs at a later moment than the stops it races with (stops reported late): whichever
    # wins, each run ends up charged for exactly its 1234 seconds.
    errors = _run_together(lambda: meters_settle_all(now=stop_at + timedelta(seconds=30)), stop_all)
    assert errors == []
    meters_settle_all(now=stop_at + timedelta(hours=1))
    _assert_no_double_charge(meters)
    for meter in meters:
        assert meter.stopped_at == stop_at
        assert meter.charged_fen == amount_owed(price_fen=600, quantity=1, unit_seconds=3600, seconds=1234)


def test_a_tick_delivered_twice_posts_once():
    meters = _meters(users=10, per_user=1)
    now = T0 + timedelta(hours=1)
    assert _run_together(lambda: meters_settle_all(now=now), lambda: meters_settle_all(now=now)) == []
    assert Transaction.objects.filter(kind="usage").count() == len(meters)
    _assert_no_double_charge(meters)


def test_a_tick_killed_mid_batch_leaves_no_trace_and_the_next_one_settles_everything(monkeypatch):
    from billing import settlement

    meters = _meters(users=5, per_user=1)
    real = settlement.ledger_insert_many

    def die_after_posting(**kwargs):
        real(**kwargs)
        raise SystemExit("worker killed")

    monkeypatch.setattr(settlement, "ledger_insert_many", die_after_posting)
    with pytest.raises(SystemExit):
        meters_settle_all(now=T0 + timedelta(hours=1))
    assert not Transaction.objects.filter(kind="usage").exists()  # rolled back with the batch
    monkeypatch.setattr(settlement, "ledger_insert_many", real)
    meters_settle_all(now=T0 + timedelta(hours=1))
    _assert_no_double_charge(meters)
    assert all(m.settled_seconds == 3600 for m in meters)


def test_two_watchers_at_once_send_one_warning_and_call_the_hook_once(settings, hooks_override):
    from django.core import mail

    from billing.alerts import balance_alerts_update
    from billing.models import BalanceAlert

    settings.BILLING_OUT_OF_FUNDS_GRACE_S = 0
    hooks_override(out_of_funds, counting_hook)
    counting_hook.calls = []
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    user = UserFactory()
    meter_start(user=user, sku=gpu_sku(), quantity=1, ref="w:1", at=T0)  # no money at all
    now = T0 + timedelta(minutes=1)
    assert _run_together(*[lambda: balance_alerts_update(now=now)] * 3) == []
    balance_alerts_update(now=now + timedelta(seconds=1))  # the grace (0 s) has passed for sure
    # One low-balance warning and one "your balance ran out", however many watchers ran.
    subjects = sorted(m.subject for m in mail.outbox)
    assert len(subjects) == 2 and "runs out" in subjects[1] and "ran out" in subjects[0]
    assert BalanceAlert.objects.filter(user=user).count() == 2  # one LOW, one EXHAUSTED episode
    assert counting_hook.calls == [user.pk]
    assert not Meter.objects.get(ref="w:1").is_open  # the hook's work, done once


def counting_hook(*, user_id):
    from billing.alerts import meters_stop_unpaid

    counting_hook.calls.append(user_id)
    meters_stop_unpaid(user_id=user_id)
