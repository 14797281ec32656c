"""A task that raises what no one declared (a bug, a database error), or a transient error past its last
retry, settles its instance with the error as its reason: nothing stays busy without a word, and a
machine that never ran costs nothing."""

import logging

import pytest
from celery.exceptions import Retry
from django.db import NotSupportedError
from django.urls import reverse

from billing.models import Meter, Transaction
from billing.services import balance_get
from instances.models import Instance, Node
from instances.reconciler import instances_reconcile
from instances.services import (
    instance_operation_fail,
    instance_release,
    instance_restart,
    instance_start,
    instance_stop,
)
from instances.tasks import RETRY, instance_provision_task
from instances.tests.conftest import committed, launch, running, simulate, statuses
from providers import TransientBackendError, get_backend
from providers.simulated.backend import SimulatedBackend, SimulatedBug

S = Instance.Status


def _meters(instance):
    return Meter.objects.filter(ref__startswith=f"instance:{instance.pk}")


def _all_cards_free() -> bool:
    return all(n.free_cards == n.total_cards for n in Node.objects.all())


def test_a_launch_whose_provision_raises_fails_with_the_error_and_costs_nothing(rich_alice):
    balance = balance_get(user=rich_alice).total
    transactions = Transaction.objects.count()

    with simulate(BUG_IN=["create"]), pytest.raises(SimulatedBug), committed():
        instance = launch(rich_alice, count=4)

    instance.refresh_from_db()
    assert instance.status == S.FAILED
    assert instance.status_reason_text == "Internal error while provisioning: SimulatedBug: simulated bug in create()"
    assert statuses(instance)[-1] == (S.PROVISIONING, S.FAILED)
    assert instance.events.last().reason_text == instance.status_reason_text
    assert not _meters(instance).exists()
    assert balance_get(user=rich_alice).total == balance
    assert Transaction.objects.count() == transactions
    assert instance.node is None and _all_cards_free()


def test_the_database_error_a_user_hit_fails_the_launch_instead_of_leaving_it_provisioning(rich_alice, monkeypatch):
    def unsupported(self, node, **kwargs):
        raise NotSupportedError("contains lookup is not supported on this database backend.")

    monkeypatch.setattr(SimulatedBackend, "_used_cards", unsupported)

    with pytest.raises(NotSupportedError), committed():
        instance = launch(rich_alice)

    instance.refresh_from_db()
    assert instance.status == S.FAILED
    assert instance.status_reason_text == (
        "Internal error while provisioning: NotSupportedError: contains lookup is not supported on this database "
        "backend."
    )


def test_the_reason_shows_on_the_page_and_in_the_api_without_a_traceback(rich_alice, client_for):
    with simulate(BUG_IN=["create"]), pytest.raises(SimulatedBug), committed():
        instance = launch(rich_alice)
    client = client_for(rich_alice)

    page = client.get(reverse("instance_detail", args=[instance.pk])).content.decode()
    api = client.get(reverse("api-instance-detail", args=[instance.pk])).json()

    reason = "Internal error while provisioning: SimulatedBug: simulated bug in create()"
    assert reason in page and "Traceback" not in page
    assert (api["status"], api["status_reason"]) == ("failed", reason)


def test_the_traceback_is_logged_for_operators(rich_alice, caplog):
    with (
        caplog.at_level(logging.ERROR, logger="core.tasks"),
        simulate(BUG_IN=["create"]),
        pytest.raises(SimulatedBug),
        committed(),
    ):
        launch(rich_alice)

    [record] = [r for r in caplog.records if r.name == "core.tasks"]
    assert "instances.tasks.instance_provision_task" in record.getMessage()
    assert record.exc_info[0] is SimulatedBug


def test_in_a_worker_the_task_is_recorded_as_failed_as_before(rich_alice):
    instance = launch(rich_alice)
    with simulate(BUG_IN=["create"]):
        result = instance_provision_task.apply(args=[str(instance.pk)], throw=False)  # as a worker runs it
    assert result.state == "FAILURE" and isinstance(result.result, SimulatedBug)
    instance.refresh_from_db()
    assert instance.status == S.FAILED


def test_a_transient_error_with_retries_left_changes_nothing(rich_alice):
    instance = launch(rich_alice)  # the task is "in the queue"
    with simulate(FAIL_CREATE_TRANSIENT=1):
        with pytest.raises(Retry):
            instance_provision_task.apply(args=[str(instance.pk)])
        with pytest.raises(TransientBackendError):
            instance_provision_task(str(instance.pk))  # called as a function: the caller decides
    instance.refresh_from_db()
    assert instance.status == S.PROVISIONING


def test_a_transient_error_still_there_after_the_last_retry_fails_the_launch(rich_alice):
    instance = launch(rich_alice)
    with simulate(FAIL_CREATE_TRANSIENT=1), pytest.raises(TransientBackendError):
        instance_provision_task.apply(args=[str(instance.pk)], retries=RETRY["max_retries"])
    instance.refresh_from_db()
    assert instance.status == S.FAILED
    assert instance.status_reason_text == (
        "Internal error while provisioning: TransientBackendError: The provider is busy; try again shortly. "
        "(still failing after 9 attempts)"
    )
    assert not _meters(instance).exists()


def test_a_failing_task_delivered_twice_fails_the_instance_once(rich_alice):
    instance = launch(rich_alice)
    with simulate(BUG_IN=["create"]):
        with pytest.raises(SimulatedBug):
            instance_provision_task.apply(args=[str(instance.pk)])
        instance_provision_task.apply(args=[str(instance.pk)])  # finds it failed: nothing to do
    assert instance.events.filter(new=S.FAILED).count() == 1
    assert instance_operation_fail(instance_id=instance.pk, error="again") is False


def test_an_instance_in_another_operation_than_the_tasks_is_left_alone(rich_alice):
    instance = launch(rich_alice)
    assert instance_operation_fail(instance_id=instance.pk, error="late", statuses=(S.STOPPING,)) is False
    instance.refresh_from_db()
    assert instance.status == S.PROVISIONING


def test_a_start_that_raises_leaves_it_stopped_with_its_disk(rich_alice):
    instance = running(rich_alice)
    with committed():
        instance_stop(instance=instance)
    instance.refresh_from_db()

    with simulate(BUG_IN=["start"]), pytest.raises(SimulatedBug), committed():
        instance_start(instance=instance)

    instance.refresh_from_db()
    assert instance.status == S.STOPPED
    assert instance.status_reason_text == (
        "Internal error while starting: SimulatedBug: simulated bug in start(). It is stopped; its disk is kept."
    )
    assert statuses(instance)[-2:] == [(S.STOPPED, S.STARTING), (S.STARTING, S.STOPPED)]
    assert _meters(instance).filter(ref__endswith=":gpu").count() == 1  # the first run only
    assert _meters(instance).filter(ref__endswith=":disk", stopped_at__isnull=True).exists()
    assert _all_cards_free()


def test_a_restart_that_raises_stops_it_with_its_disk(rich_alice):
    instance = running(rich_alice)

    with simulate(BUG_IN=["restart"]), pytest.raises(SimulatedBug), committed():
        instance_restart(instance=instance)

    instance.refresh_from_db()
    assert instance.status == S.STOPPED
    assert "Internal error while restarting: SimulatedBug" in instance.status_reason_text
    assert statuses(instance)[-2:] == [(S.RESTARTING, S.STOPPING), (S.STOPPING, S.STOPPED)]
    assert not _meters(instance).filter(ref__endswith=":gpu", stopped_at__isnull=True).exists()
    [machine] = get_backend("default").machines()
    assert machine.observed == "stopped"  # powered off, disk kept


def test_a_stop_that_raises_marks_it_stopped_and_the_reconciler_powers_it_off(rich_alice):
    instance = running(rich_alice)

    with simulate(BUG_IN=["stop"]), pytest.raises(SimulatedBug), committed():
        instance_stop(instance=instance)

    instance.refresh_from_db()
    assert instance.status == S.STOPPED
    assert instance.status_reason_text == (
        "Internal error while stopping: SimulatedBug: simulated bug in stop(). It is marked stopped; its disk is kept."
    )
    assert get_backend("default").machines()[0].observed == "running"  # the provider never heard

    with committed():
        instances_reconcile()

    assert get_backend("default").machines()[0].observed == "stopped"
    instance.refresh_from_db()
    assert instance.status == S.STOPPED


def test_a_release_that_raises_marks_it_released_and_the_reconciler_destroys_the_machine(rich_alice):
    instance = running(rich_alice)

    with simulate(BUG_IN=["destroy"]), pytest.raises(SimulatedBug), committed():
        instance_release(instance=instance)

    instance.refresh_from_db()
    assert instance.status == S.RELEASED
    assert instance.status_reason_text.startswith("Internal error while releasing: SimulatedBug")
    assert not _meters(instance).filter(stopped_at__isnull=True).exists()
    assert len(get_backend("default").machines()) == 1

    assert instances_reconcile()["destroyed"] == 1
    assert get_backend("default").machines() == []
