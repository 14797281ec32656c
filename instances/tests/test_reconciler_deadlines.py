"""Nothing stays busy for ever: the reconciler re-drives an operation whose task was lost after
``INSTANCES_REDRIVE_AFTER_S``, and settles it with why past its deadline, whether or not the provider
answers. Time passes by moving ``status_changed_at`` back."""

from datetime import timedelta

from django.utils import timezone

from billing.models import Meter
from instances import tasks
from instances.lifecycle import ALLOWED, SETTLES_AT
from instances.models import Instance, Node
from instances.reconciler import instances_reconcile
from instances.services import instance_release, instance_restart, instance_start, instance_stop
from instances.tests.conftest import committed, launch, running, simulate, statuses
from providers import get_backend

S = Instance.Status


def _record_enqueued(monkeypatch) -> list:
    """From now on, the instance tasks enqueued (name, instance id), recorded instead of run."""
    sent = []
    for name in (
        "instance_provision_task",
        "instance_start_task",
        "instance_stop_task",
        "instance_restart_task",
        "instance_release_task",
    ):
        task = getattr(tasks, name)
        monkeypatch.setattr(task, "apply_async", lambda args=None, name=name, **kw: sent.append((name, args[0])))
    return sent


def _age(instance, seconds: int) -> None:
    Instance.objects.filter(pk=instance.pk).update(status_changed_at=timezone.now() - timedelta(seconds=seconds + 1))


def _reconcile():
    with committed():
        return instances_reconcile()


def _reason(instance) -> str:
    instance.refresh_from_db()
    return instance.status_reason_text


def test_every_busy_status_has_a_deadline_and_a_status_to_settle_in_that_the_table_allows():
    assert set(SETTLES_AT) == set(Instance.BUSY)
    for src, dst in SETTLES_AT.items():
        # A restart is given up through stopping, as any stop.
        assert dst in ALLOWED[src] or (S.STOPPING in ALLOWED[src] and dst in ALLOWED[S.STOPPING])


def test_a_launch_whose_task_was_lost_is_redriven_then_failed_at_its_deadline(rich_alice, settings, monkeypatch):
    instance = launch(rich_alice)  # the provision task never ran

    enqueued = _record_enqueued(monkeypatch)
    _reconcile()
    assert enqueued == [("instance_provision_task", str(instance.pk))]

    _age(instance, settings.INSTANCES_PROVISION_TIMEOUT_S)
    assert _reconcile()["overdue"] == 0  # the sync settled it first
    assert _reason(instance) == "Launch failed: the machine did not boot within 15 minutes"
    assert instance.status == S.FAILED
    assert not Meter.objects.filter(ref__startswith=f"instance:{instance.pk}").exists()
    assert all(n.free_cards == n.total_cards for n in Node.objects.all())


def test_a_launch_interrupted_before_provisioning_fails_at_its_deadline(rich_alice, settings):
    instance = launch(rich_alice)
    Instance.objects.filter(pk=instance.pk).update(status=S.SCHEDULING)
    _age(instance, settings.INSTANCES_PROVISION_TIMEOUT_S)

    _reconcile()

    assert _reason(instance) == "Launch was interrupted"
    assert instance.status == S.FAILED


def test_a_start_whose_task_was_lost_is_redriven_then_stopped_at_its_deadline(rich_alice, settings, monkeypatch):
    instance = running(rich_alice)
    with committed():
        instance_stop(instance=instance)
    instance.refresh_from_db()
    instance_start(instance=instance)  # the start task never ran

    enqueued = _record_enqueued(monkeypatch)
    _reconcile()
    assert enqueued == [("instance_start_task", str(instance.pk))]

    _age(instance, settings.INSTANCES_OPERATION_TIMEOUT_S)
    _reconcile()
    assert _reason(instance) == "The machine did not start in time"
    assert instance.status == S.STOPPED
    assert all(n.free_cards == n.total_cards for n in Node.objects.all())


def test_a_restart_that_never_finishes_is_stopped_at_its_deadline_with_its_disk(rich_alice, settings, monkeypatch):
    instance = running(rich_alice)
    with simulate(BOOT_DELAY_S=10**6), committed():
        instance_restart(instance=instance)  # reboots, and never comes back

    enqueued = _record_enqueued(monkeypatch)
    _reconcile()
    instance.refresh_from_db()
    assert instance.status == S.RESTARTING
    assert enqueued == []  # a restart is not sent twice: a running machine reads as restarted

    _age(instance, settings.INSTANCES_OPERATION_TIMEOUT_S)
    _reconcile()
    assert _reason(instance) == "The machine did not restart within 10 minutes. It is stopped; its disk is kept."
    assert statuses(instance)[-2:] == [(S.RESTARTING, S.STOPPING), (S.STOPPING, S.STOPPED)]
    assert get_backend("default").machines()[0].observed == "stopped"
    assert not Meter.objects.filter(ref__endswith=":gpu", stopped_at__isnull=True).exists()


def test_a_stop_whose_task_was_lost_is_redriven_then_marked_stopped_at_its_deadline(rich_alice, settings, monkeypatch):
    instance = running(rich_alice)
    instance_stop(instance=instance)  # the stop task never ran

    enqueued = _record_enqueued(monkeypatch)
    _reconcile()
    assert enqueued == [("instance_stop_task", str(instance.pk))]

    _age(instance, settings.INSTANCES_OPERATION_TIMEOUT_S)
    with simulate(UNREACHABLE=True):
        report = _reconcile()
    assert report["unreachable"] == ["default"] and report["overdue"] == 1
    assert _reason(instance) == (
        "The provider did not confirm the stop within 10 minutes. It is marked stopped; its disk is kept."
    )
    assert instance.status == S.STOPPED

    _reconcile()  # the provider answers again: the machine it still runs is stopped
    assert get_backend("default").machines()[0].observed == "stopped"


def test_a_release_whose_task_was_lost_is_redriven_then_marked_released_at_its_deadline(
    rich_alice, settings, monkeypatch
):
    instance = running(rich_alice)
    instance_release(instance=instance)  # the release task never ran

    enqueued = _record_enqueued(monkeypatch)
    _reconcile()
    assert enqueued == [("instance_release_task", str(instance.pk))]

    _age(instance, settings.INSTANCES_OPERATION_TIMEOUT_S)
    with simulate(UNREACHABLE=True):
        _reconcile()
    assert _reason(instance) == (
        "The provider did not confirm the release within 10 minutes. It is marked released; the console keeps "
        "deleting it at the provider."
    )
    assert instance.status == S.RELEASED

    assert _reconcile()["destroyed"] == 1  # the provider answers again
    assert get_backend("default").machines() == []


def test_an_instance_whose_sync_raises_holds_up_no_other_and_still_meets_its_deadline(rich_alice, settings):
    first, second = launch(rich_alice), launch(rich_alice)  # their tasks never ran

    with simulate(BUG_IN=["poll"]):
        assert _reconcile()["synced"] == 2
        for instance in (first, second):
            _age(instance, settings.INSTANCES_PROVISION_TIMEOUT_S)
        assert _reconcile()["overdue"] == 2

    for instance in (first, second):
        assert _reason(instance) == "Launch failed: the machine did not boot within 15 minutes"


def test_a_backend_that_raises_still_has_its_instances_settled_at_their_deadline(rich_alice, settings):
    instance = launch(rich_alice)
    _age(instance, settings.INSTANCES_PROVISION_TIMEOUT_S)

    with simulate(BUG_IN=["machines"]):
        report = _reconcile()

    assert report["unreachable"] == ["default"] and report["overdue"] == 1
    instance.refresh_from_db()
    assert instance.status == S.FAILED
