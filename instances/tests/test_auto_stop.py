from datetime import timedelta

import pytest
from django.utils import timezone

from instances.backends import get_backend
from instances.models import Instance, SimulatedMachine
from instances.services import LaunchInvalid, instance_auto_stop_set, instances_auto_stop
from instances.tests.conftest import committed, running

S = Instance.Status


def test_it_stops_at_the_chosen_time(rich_alice):
    instance = running(rich_alice)
    instance_auto_stop_set(instance=instance, at=timezone.now() + timedelta(minutes=5))
    with committed():
        assert instances_auto_stop(now=timezone.now() + timedelta(minutes=4)) == 0
        assert instances_auto_stop(now=timezone.now() + timedelta(minutes=6)) == 1
    instance.refresh_from_db()
    assert instance.status == S.STOPPED
    assert instance.auto_stop_at is None
    assert "scheduled time" in instance.events.get(new=S.STOPPING).reason


def test_it_stops_after_the_gpus_idle_for_the_chosen_minutes(rich_alice):
    instance = running(rich_alice)
    instance_auto_stop_set(instance=instance, idle_minutes=30)
    SimulatedMachine.objects.filter(key=instance.key).update(
        last_active_at=timezone.now() - timedelta(minutes=20), ready_at=timezone.now() - timedelta(minutes=40)
    )
    assert instances_auto_stop() == 0
    SimulatedMachine.objects.filter(key=instance.key).update(last_active_at=timezone.now() - timedelta(minutes=31))
    with committed():
        assert instances_auto_stop() == 1
    instance.refresh_from_db()
    assert instance.status == S.STOPPED
    assert "idle for 30 minutes" in instance.events.get(new=S.STOPPING).reason


def test_activity_resets_the_idle_clock(rich_alice):
    instance = running(rich_alice)
    instance_auto_stop_set(instance=instance, idle_minutes=5)
    SimulatedMachine.objects.filter(key=instance.key).update(ready_at=timezone.now() - timedelta(minutes=40))
    get_backend("default").machine_touch(key=instance.key)
    assert instances_auto_stop() == 0


def test_a_time_in_the_past_is_refused(rich_alice):
    instance = running(rich_alice)
    with pytest.raises(LaunchInvalid):
        instance_auto_stop_set(instance=instance, at=timezone.now() - timedelta(minutes=1))
