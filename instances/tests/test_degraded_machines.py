"""A machine the provider reports DEGRADED (a part of it died) is repaired by a start in place, with the
reason on the timeline; the sync gives up after ``INSTANCES_CRASH_LIMIT`` crashes in the window: a
running instance is stopped with its disk, a start of a stopped one goes back to stopped with its disk."""

from __future__ import annotations

from instances.models import Instance
from instances.services import instance_start, instance_stop, instance_sync
from instances.tests.conftest import committed, running
from providers import Observation, Observed
from providers.simulated.backend import SimulatedBackend


def test_a_degraded_running_machine_is_started_again_until_the_limit(rich_alice, settings, monkeypatch):
    settings.INSTANCES_CRASH_LIMIT = 3
    instance = running(rich_alice)
    starts = []
    monkeypatch.setattr(
        SimulatedBackend, "start", lambda self, *, key, state, node, spec=None: starts.append(key) or state
    )
    monkeypatch.setattr(
        SimulatedBackend, "poll", lambda self, *, key, state: Observation(Observed.DEGRADED, detail="JupyterLab died")
    )

    instance_sync(instance_id=instance.pk)
    instance_sync(instance_id=instance.pk)
    instance.refresh_from_db()
    assert instance.status == "running" and starts == [instance.key] * 2
    assert [e.reason_text for e in instance.events.filter(old="running", new="running")] == [
        "JupyterLab died; restarted it"
    ] * 2

    instance_sync(instance_id=instance.pk)
    instance.refresh_from_db()
    assert instance.status == "stopped" and len(starts) == 2
    assert instance.status_reason_text == "Stopped after repeated crashes (3 in 10 minutes), disk kept: JupyterLab died"
    assert instance.node is None


def test_crashes_outside_the_window_do_not_count(rich_alice, settings, monkeypatch):
    settings.INSTANCES_CRASH_LIMIT = 2
    instance = running(rich_alice)
    monkeypatch.setattr(SimulatedBackend, "start", lambda self, *, key, state, node, spec=None: state)
    monkeypatch.setattr(
        SimulatedBackend, "poll", lambda self, *, key, state: Observation(Observed.DEGRADED, detail="x")
    )
    instance_sync(instance_id=instance.pk)
    settings.INSTANCES_CRASH_WINDOW_S = 0
    instance_sync(instance_id=instance.pk)
    instance.refresh_from_db()
    assert instance.status == "running"


def test_a_start_that_keeps_crashing_goes_back_to_stopped_with_why(rich_alice, settings, monkeypatch):
    settings.INSTANCES_CRASH_LIMIT = 1
    instance = running(rich_alice)
    with committed():
        instance_stop(instance=instance)
    monkeypatch.setattr(
        SimulatedBackend, "poll", lambda self, *, key, state: Observation(Observed.DEGRADED, detail="x")
    )
    with committed():
        instance_start(instance=Instance.objects.get(pk=instance.pk))
    instance.refresh_from_db()
    assert instance.status == "stopped"
    assert instance.status_reason_text == "Stopped after repeated crashes (1 in 10 minutes), disk kept: x"
