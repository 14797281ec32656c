from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from billing.models import Meter, Transaction
from billing.services import meter_start, trial_claim
from billing.tasks import balance_alerts_task, meters_settle_task, trial_expire_task
from billing.tests.helpers import gpu_sku


def test_the_beat_runs_settlement_and_alerts_every_interval_and_checks_hourly():
    schedule = settings.CELERY_BEAT_SCHEDULE
    assert schedule["billing-settle-meters"]["task"] == "billing.tasks.meters_settle_task"
    assert schedule["billing-settle-meters"]["schedule"] == settings.BILLING_SETTLE_INTERVAL_S == 60
    assert schedule["billing-balance-alerts"]["schedule"] == settings.BILLING_SETTLE_INTERVAL_S
    assert schedule["billing-ledger-check"]["task"] == "billing.tasks.ledger_check_task"
    assert schedule["billing-trial-expiry"]["task"] == "billing.tasks.trial_expire_task"
    assert meters_settle_task.acks_late and balance_alerts_task.acks_late


def test_the_settle_task_delivered_twice_charges_once(alice):
    trial_claim(user=alice)
    meter_start(user=alice, sku=gpu_sku(), quantity=1, ref="i:1", at=timezone.now() - timedelta(hours=1))
    first = meters_settle_task.delay().get()
    meters_settle_task.delay().get()
    assert first["postings"] == 1
    assert Transaction.objects.filter(kind="usage").count() <= 2  # the second adds at most the seconds since
    meter = Meter.objects.get(ref="i:1")
    assert meter.charged_fen == meter.owed_fen


def test_the_other_tasks_run(alice):
    balance_alerts_task.delay().get()
    assert trial_expire_task.delay().get() == 0
