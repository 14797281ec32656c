from datetime import timedelta

from django.core import mail
from django.utils import timezone

from billing.alerts import balance_alerts_update
from billing.hooks import out_of_funds
from billing.models import BalanceAlert, Meter
from billing.selectors import low_balance_warning_active, out_of_funds_since, runway_get
from billing.services import meter_start, trial_claim
from billing.settlement import meters_settle_all
from billing.tests.helpers import disk_sku, gpu_sku, topup

NOW = timezone.now().replace(microsecond=0)


def _watch(at):
    meters_settle_all(now=at)
    return balance_alerts_update(now=at)


def test_a_short_runway_warns_once_per_episode_and_a_top_up_resets_it(alice, django_capture_on_commit_callbacks):
    trial_claim(user=alice)  # ¥10
    meter_start(user=alice, sku=gpu_sku(price_fen=1200), quantity=1, ref="i:1", at=NOW)  # 50 min of runway
    with django_capture_on_commit_callbacks(execute=True):  # the e-mail goes on commit
        assert _watch(NOW).warned == 1
    assert low_balance_warning_active(user=alice)
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["alice@example.com"]
    assert "runs out" in mail.outbox[0].subject
    for minute in range(1, 5):
        with django_capture_on_commit_callbacks(execute=True):
            assert _watch(NOW + timedelta(minutes=minute)).warned == 0  # not every minute
    assert len(mail.outbox) == 1
    topup(alice, 100_000)
    assert _watch(NOW + timedelta(minutes=6)).resolved == 1
    assert not low_balance_warning_active(user=alice)
    assert _watch(NOW + timedelta(minutes=7)).warned == 0


def test_a_long_runway_sends_nothing(alice):
    topup(alice, 100_000)
    meter_start(user=alice, sku=gpu_sku(), quantity=1, ref="i:1", at=NOW)
    assert _watch(NOW).warned == 0 and mail.outbox == []
    assert not low_balance_warning_active(user=alice)


def test_out_of_funds_stops_compute_after_the_grace_period_and_keeps_storage(alice, settings):
    settings.BILLING_OUT_OF_FUNDS_GRACE_S = 300
    trial_claim(user=alice)
    meter_start(user=alice, sku=gpu_sku(price_fen=6000), quantity=1, ref="i:1", at=NOW)  # ¥10 lasts 10 min
    meter_start(user=alice, sku=disk_sku(), quantity=50, ref="disk:1", at=NOW)
    _watch(NOW + timedelta(minutes=5))
    assert out_of_funds_since(user=alice) is None
    _watch(NOW + timedelta(minutes=11))
    assert out_of_funds_since(user=alice) == NOW + timedelta(minutes=11)
    assert Meter.objects.get(ref="i:1").is_open  # within the grace period
    report = _watch(NOW + timedelta(minutes=16))
    assert report.hooks_called == 1
    assert not Meter.objects.get(ref="i:1").is_open
    assert Meter.objects.get(ref="disk:1").is_open
    assert _watch(NOW + timedelta(minutes=20)).hooks_called == 0  # once per episode


def test_the_out_of_funds_hook_is_called_with_the_user_id(alice, settings, hooks_override):
    calls = []
    hooks_override(out_of_funds, record_hook)
    settings.BILLING_OUT_OF_FUNDS_GRACE_S = 0
    record_hook.calls = calls
    meter_start(user=alice, sku=gpu_sku(), quantity=1, ref="i:1", at=NOW)  # no balance at all
    _watch(NOW + timedelta(seconds=10))
    _watch(NOW + timedelta(seconds=20))
    assert calls == [alice.pk]
    assert runway_get(user=alice, now=NOW + timedelta(seconds=20)).seconds == 0


def test_a_failing_hook_is_retried_at_the_next_run(alice, settings, hooks_override):
    hooks_override(out_of_funds, flaky_hook)
    settings.BILLING_OUT_OF_FUNDS_GRACE_S = 0
    flaky_hook.calls = []
    meter_start(user=alice, sku=gpu_sku(), quantity=1, ref="i:1", at=NOW)
    assert _watch(NOW + timedelta(seconds=10)).hooks_called == 0
    assert _watch(NOW + timedelta(seconds=20)).hooks_called == 1
    assert flaky_hook.calls == [alice.pk, alice.pk]
    assert BalanceAlert.objects.get(kind="exhausted").notified_at is not None


def record_hook(*, user_id):
    record_hook.calls.append(user_id)


def flaky_hook(*, user_id):
    flaky_hook.calls.append(user_id)
    if len(flaky_hook.calls) == 1:
        raise ConnectionError("provider unreachable")


def test_with_the_notify_policy_the_user_is_told_and_nothing_is_stopped(
    alice, settings, hooks_override, django_capture_on_commit_callbacks
):
    calls = []
    record_hook.calls = calls
    hooks_override(out_of_funds, record_hook)
    settings.BILLING_OUT_OF_FUNDS_POLICY = "notify"
    settings.BILLING_OUT_OF_FUNDS_GRACE_S = 0
    meter_start(user=alice, sku=gpu_sku(), quantity=1, ref="i:1", at=NOW)  # no balance at all
    with django_capture_on_commit_callbacks(execute=True):  # the e-mails go on commit
        for seconds in (10, 20, 30):
            assert _watch(NOW + timedelta(seconds=seconds)).hooks_called == 0
    assert calls == []
    assert Meter.objects.get(ref="i:1").is_open  # still running, still charged
    assert BalanceAlert.objects.get(kind="exhausted").notified_at is not None
    assert [m.subject for m in mail.outbox if "ran out" in m.subject] == ["Your balance ran out"]  # once
