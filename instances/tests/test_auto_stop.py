from datetime import timedelta

import pytest
from django.utils import timezone

from instances.errors import LaunchInvalid
from instances.models import Instance
from instances.services import instance_auto_stop_set, instances_auto_stop
from instances.tests.conftest import committed, running
from notifications.models import Kind, Notification
from providers import get_backend
from providers.simulated.models import SimulatedMachine

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
    assert "scheduled time" in instance.events.get(new=S.STOPPING).reason_text


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
    assert "idle for 30 minutes" in instance.events.get(new=S.STOPPING).reason_text
    told = Notification.objects.get(user=rich_alice, kind=Kind.IDLE_STOPPED)  # inbox and webhook, no e-mail
    assert told.title == f"{instance.name} was stopped: idle for 30 minutes"


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


def test_the_owner_is_warned_before_an_idle_stop_and_keep_running_restarts_the_clock(rich_alice, mailoutbox, client):
    instance = running(rich_alice)
    instance_auto_stop_set(instance=instance, idle_minutes=30)
    machines = SimulatedMachine.objects.filter(key=instance.key)
    machines.update(ready_at=timezone.now() - timedelta(hours=2), last_active_at=timezone.now() - timedelta(minutes=19))

    def warnings() -> list:
        return [m for m in mailoutbox if "will stop" in m.subject]

    assert instances_auto_stop() == 0 and not warnings()  # 11 minutes left: before the 10-minute warning

    machines.update(last_active_at=timezone.now() - timedelta(minutes=22))
    with committed():
        assert instances_auto_stop() == 0
        assert instances_auto_stop() == 0  # warned once per idle stretch
    assert len(warnings()) == 1 and "will stop in 8 minutes" in warnings()[0].subject
    assert warnings()[0].to == [rich_alice.email]
    client.force_login(rich_alice)
    page = client.get(f"/instances/{instance.pk}/").content.decode()
    assert 'id="idle-warning"' in page and "Keep running" in page

    # "Keep running" from the page: the clock restarts, so 31 provider-idle minutes later it still runs.
    client.post(f"/instances/{instance.pk}/keep-running/")
    instance.refresh_from_db()
    assert instance.auto_stop_warned_at is None and instance.auto_stop_snoozed_at is not None
    machines.update(last_active_at=timezone.now() - timedelta(minutes=31))
    assert instances_auto_stop() == 0
    assert instances_auto_stop(now=timezone.now() + timedelta(minutes=31)) == 1  # idle again, for real
    instance.refresh_from_db()
    assert instance.status in (S.STOPPING, S.STOPPED)


def test_keep_running_through_the_api_and_not_for_a_stopped_instance(rich_alice, client):
    instance = running(rich_alice)
    client.force_login(rich_alice)
    assert client.post(f"/api/v1/instances/{instance.pk}/keep-running/").status_code == 200
    with committed():
        from instances.services import instance_stop

        instance_stop(instance=instance)
    response = client.post(f"/api/v1/instances/{instance.pk}/keep-running/")
    assert response.status_code == 409 and response.json()["error"]["message"]
