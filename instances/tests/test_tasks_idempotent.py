"""Tasks delivered twice, and a worker that died between the provider's answer and our update."""

import pytest

from instances.models import Instance
from instances.reconciler import instances_reconcile
from instances.services import instance_provision
from instances.services.common import _spec
from instances.tasks import instance_provision_task, instance_release_task, instance_stop_task
from instances.tests.conftest import committed, launch, running, simulate
from providers import TransientBackendError, get_backend

S = Instance.Status


def test_a_provision_task_delivered_twice_makes_one_machine(rich_alice):
    instance = launch(rich_alice)  # committed callbacks not run: the task is "in the queue"
    instance_provision_task.apply(args=[str(instance.pk)])
    instance_provision_task.apply(args=[str(instance.pk)])
    instance.refresh_from_db()
    assert instance.status == S.RUNNING
    assert len(get_backend("default").machines()) == 1
    assert instance.events.filter(new=S.RUNNING).count() == 1


def test_a_stop_and_a_release_task_delivered_twice_act_once(rich_alice):
    instance = running(rich_alice)
    from instances.services import instance_release, instance_stop

    instance_stop(instance=instance)  # the task is queued, not run
    instance_stop_task.apply(args=[str(instance.pk)])
    instance_stop_task.apply(args=[str(instance.pk)])
    instance.refresh_from_db()
    assert instance.status == S.STOPPED
    instance_release(instance=instance)
    instance_release_task.apply(args=[str(instance.pk)])
    instance_release_task.apply(args=[str(instance.pk)])
    instance.refresh_from_db()
    assert instance.status == S.RELEASED
    assert instance.events.filter(new=S.RELEASED).count() == 1


def _crash_after_backend_create(instance):
    """What a worker killed right after the provider answered leaves: a machine, and no record of it."""
    get_backend("default").create(key=instance.key, spec=_spec(instance))
    instance.refresh_from_db()
    assert instance.status == S.PROVISIONING
    assert instance.backend_state == {}


def test_a_rerun_after_a_crash_finds_the_machine_instead_of_making_a_second(rich_alice):
    instance = launch(rich_alice)
    _crash_after_backend_create(instance)

    instance_provision_task.apply(args=[str(instance.pk)])  # the redelivered message

    instance.refresh_from_db()
    assert instance.status == S.RUNNING
    assert instance.backend_state["machine"]
    assert len(get_backend("default").machines()) == 1


def test_the_reconciler_finishes_what_a_crashed_worker_left(rich_alice):
    instance = launch(rich_alice)
    _crash_after_backend_create(instance)

    with committed():
        instances_reconcile()

    instance.refresh_from_db()
    assert instance.status == S.RUNNING
    assert len(get_backend("default").machines()) == 1


def test_a_create_whose_answer_was_lost_is_retried_and_finds_its_machine(rich_alice):
    instance = launch(rich_alice)
    with simulate(LOSE_CREATE_RESPONSE=1):
        with pytest.raises(TransientBackendError):
            instance_provision(instance_id=instance.pk)
        instance_provision_task.apply(args=[str(instance.pk)])  # Celery's retry
    instance.refresh_from_db()
    assert instance.status == S.RUNNING
    assert len(get_backend("default").machines()) == 1


def test_the_reconciler_reprovisions_when_the_task_was_lost_before_any_create(rich_alice):
    instance = launch(rich_alice)  # the task never ran
    with committed():
        instances_reconcile()
    instance.refresh_from_db()
    assert instance.status == S.RUNNING
