"""Idle auto-stop judged from the stored GPU samples: it works on an engine whose provider reports no
use (as Kubernetes and Slurm), keeps the warning and "Keep running", never treats silence or an
unreadable card as idle, and any sign of use (the provider's or the samples') counts."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from django.utils import timezone

from instances.models import Instance
from instances.services import instance_auto_stop_set, instance_auto_stop_snooze, instances_auto_stop
from instances.tests.conftest import SMALL_FLEET, committed, running
from metrics.models import CardRollup, CardSample
from metrics.selectors import gpu_idle_seconds
from providers.simulated.backend import SimulatedBackend
from providers.simulated.models import SimulatedMachine

S = Instance.Status


class ReportsNoUse(SimulatedBackend):
    """The simulated cloud, but its poll says nothing of use, as the Kubernetes and Slurm backends."""

    def poll(self, *, key, state):
        return replace(super().poll(key=key, state=state), idle_seconds=None)


@pytest.fixture(autouse=True)
def no_use_reported(settings):
    settings.PROVISIONING_BACKENDS = {
        "default": {
            "BACKEND": f"{__name__}.ReportsNoUse",
            "OPTIONS": {"FLEET": SMALL_FLEET, "BOOT_DELAY_S": 0},
        }
    }


def _booted(instance, minutes_ago: int) -> None:
    Instance.objects.filter(pk=instance.pk).update(running_since=timezone.now() - timedelta(minutes=minutes_ago))


def _samples(instance, *, minutes: int, util, until_minutes_ago: int = 0, cards: int = 1) -> None:
    """One sample per 15 s per card over ``minutes`` ending ``until_minutes_ago`` ago."""
    end = timezone.now() - timedelta(minutes=until_minutes_ago)
    CardSample.objects.bulk_create(
        CardSample(instance_id=instance.pk, at=end - timedelta(seconds=15 * i), card=card, utilization_pct=util)
        for i in range(minutes * 4)
        for card in range(cards)
    )


@pytest.fixture
def idle_machine(rich_alice):
    instance = running(rich_alice)
    instance_auto_stop_set(instance=instance, idle_minutes=30)
    _booted(instance, 60)
    return instance


def test_without_samples_an_engine_that_reports_no_use_is_never_stopped(idle_machine):
    assert instances_auto_stop() == 0


def test_cards_idle_for_the_chosen_minutes_stop_it(idle_machine):
    _samples(idle_machine, minutes=20, util=1)
    assert instances_auto_stop() == 0  # 20 minutes idle: in the warning window, not yet
    _samples(idle_machine, minutes=12, util=0, until_minutes_ago=20)
    with committed():
        assert instances_auto_stop() == 1
    idle_machine.refresh_from_db()
    assert idle_machine.status == S.STOPPED
    assert "idle for 30 minutes" in idle_machine.events.get(new=S.STOPPING).reason_text


def test_one_busy_card_is_use(rich_alice):
    instance = running(rich_alice, count=2)
    instance_auto_stop_set(instance=instance, idle_minutes=30)
    _booted(instance, 60)
    _samples(instance, minutes=40, util=0, cards=2)
    now = timezone.now()
    CardSample.objects.filter(
        instance_id=instance.pk, card=1, at__gte=now - timedelta(minutes=4), at__lte=now - timedelta(minutes=3)
    ).update(utilization_pct=60)
    assert instances_auto_stop() == 0
    instance.refresh_from_db()
    assert 180 <= gpu_idle_seconds(running_since={instance.pk: instance.running_since})[instance.pk] < 200


def test_the_owner_is_warned_and_keep_running_restarts_the_clock(idle_machine, mailoutbox):
    _samples(idle_machine, minutes=25, util=0)
    with committed():
        assert instances_auto_stop() == 0
    idle_machine.refresh_from_db()
    assert idle_machine.auto_stop_warned_at is not None
    assert len(mailoutbox) == 1 and "will stop in" in mailoutbox[0].subject
    with committed():
        instance_auto_stop_snooze(instance=idle_machine)
    _samples(idle_machine, minutes=10, util=0, until_minutes_ago=25)  # 35 idle minutes by the samples
    assert instances_auto_stop() == 0  # but "Keep running" was pressed just now
    assert Instance.objects.get(pk=idle_machine.pk).status == S.RUNNING


def test_silence_is_not_idleness(idle_machine):
    _samples(idle_machine, minutes=40, util=0, until_minutes_ago=5)  # nothing for 5 minutes
    assert instances_auto_stop() == 0
    idle_machine.refresh_from_db()
    assert gpu_idle_seconds(running_since={idle_machine.pk: idle_machine.running_since}) == {}


def test_an_unreadable_card_is_not_idle(idle_machine):
    _samples(idle_machine, minutes=40, util=None)
    assert instances_auto_stop() == 0


def test_the_clock_starts_at_the_boot(idle_machine):
    _samples(idle_machine, minutes=50, util=0)
    _booted(idle_machine, 10)  # restarted 10 minutes ago: older idle samples do not count
    assert instances_auto_stop() == 0


def test_idleness_longer_than_the_raw_samples_is_read_from_the_rollups(rich_alice, settings):
    settings.METRICS_RAW_RETENTION_S = 3600
    instance = running(rich_alice)
    instance_auto_stop_set(instance=instance, idle_minutes=120)
    _booted(instance, 600)
    _samples(instance, minutes=60, util=0)
    now = timezone.now()
    CardRollup.objects.bulk_create(
        CardRollup(
            instance_id=instance.pk,
            at=now - timedelta(minutes=5 * i),
            card=0,
            samples=20,
            utilization_avg_pct=0 if i < 30 else 70,
            utilization_max_pct=2 if i < 30 else 100,
        )
        for i in range(13, 40)  # idle buckets from 2.5 hours ago, busy before that
    )
    instance.refresh_from_db()
    idle = gpu_idle_seconds(running_since={instance.pk: instance.running_since})[instance.pk]
    assert 145 * 60 <= idle <= 146 * 60  # the last busy bucket (30 × 5 min ago) ended 145 minutes ago
    with committed():
        assert instances_auto_stop() == 1


def test_any_sign_of_use_counts(rich_alice, settings):
    from instances.tests.conftest import backends

    settings.PROVISIONING_BACKENDS = backends()  # the simulated cloud that reports use itself
    instance = running(rich_alice)
    instance_auto_stop_set(instance=instance, idle_minutes=30)
    _booted(instance, 60)
    SimulatedMachine.objects.filter(key=instance.key).update(
        last_active_at=timezone.now() - timedelta(minutes=45), ready_at=timezone.now() - timedelta(minutes=60)
    )
    _samples(instance, minutes=40, util=0)
    CardSample.objects.filter(instance_id=instance.pk, at__gte=timezone.now() - timedelta(minutes=2)).update(
        utilization_pct=90
    )
    assert instances_auto_stop() == 0  # the provider says 45 minutes idle; the cards worked 2 minutes ago
