import uuid

from instances.models import Instance, StrayMachine
from instances.reconciler import instances_reconcile
from instances.tests.conftest import committed, running
from providers import InstanceSpec, get_backend

S = Instance.Status


def test_a_machine_the_console_does_not_know_is_reported_not_touched(rich_alice):
    backend = get_backend("default")
    backend.nodes()
    key = str(uuid.uuid4())
    backend.create(
        key=key,
        spec=InstanceSpec(node="cn-north-1-a800-80g-01", gpu_model="a800-80g", gpu_count=1, image="x", disk_gb=50),
    )

    report = instances_reconcile()

    assert report["stray"] == 1
    stray = StrayMachine.objects.get(key=key)
    assert "cn-north-1-a800-80g-01" in stray.detail
    assert [m.key for m in backend.machines()] == [key]


def test_a_stray_that_disappears_is_marked_resolved(rich_alice):
    backend = get_backend("default")
    backend.nodes()
    key = str(uuid.uuid4())
    backend.create(
        key=key,
        spec=InstanceSpec(node="cn-north-1-a800-80g-01", gpu_model="a800-80g", gpu_count=1, image="x", disk_gb=50),
    )
    instances_reconcile()
    backend.destroy(key=key, state={})
    instances_reconcile()
    assert StrayMachine.objects.get(key=key).resolved_at is not None


def test_a_machine_leaked_by_a_released_instance_is_destroyed(rich_alice):
    instance = running(rich_alice)
    # A crash released the record but the destroy never reached the provider.
    Instance.objects.filter(pk=instance.pk).update(status=S.RELEASED)
    report = instances_reconcile()
    assert report["destroyed"] == 1
    assert get_backend("default").machines() == []


def test_a_machine_stopped_behind_the_consoles_back_is_followed(rich_alice):
    instance = running(rich_alice)
    get_backend("default").stop(key=instance.key, state=instance.backend_state)
    with committed():
        instances_reconcile()
    instance.refresh_from_db()
    assert instance.status == S.STOPPED
    assert instance.events.get(new=S.STOPPING).reason_text == "Stopped by the provider"


def test_a_stop_whose_task_vanished_is_driven_to_the_end(rich_alice):
    from instances.services import instance_stop

    instance = running(rich_alice)
    instance_stop(instance=instance)  # task lost: never ran
    with committed():
        instances_reconcile()
    instance.refresh_from_db()
    assert instance.status == S.STOPPED
