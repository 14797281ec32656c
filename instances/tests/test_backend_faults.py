from datetime import timedelta

import pytest
from django.utils import timezone

from instances.models import Instance, Node
from instances.reconciler import instances_reconcile
from instances.services import instance_provision, instance_sync
from instances.tasks import instance_provision_task
from instances.tests.conftest import committed, launch, simulate
from providers import TransientBackendError, get_backend

S = Instance.Status


def test_a_transient_create_failure_is_retried_with_backoff(rich_alice):
    assert TransientBackendError in instance_provision_task.autoretry_for
    assert instance_provision_task.retry_backoff is True
    assert instance_provision_task.acks_late is True
    instance = launch(rich_alice)
    with simulate(FAIL_CREATE_TRANSIENT=1), pytest.raises(TransientBackendError):
        instance_provision(instance_id=instance.pk)  # the task body: the error reaches Celery's retry
    instance.refresh_from_db()
    assert instance.status == S.PROVISIONING  # still waiting: nothing failed for good
    instance_provision_task.apply(args=[str(instance.pk)])  # the provider recovered
    instance.refresh_from_db()
    assert instance.status == S.RUNNING


def test_a_permanent_create_failure_fails_the_instance_with_the_reason_and_frees_its_cards(rich_alice):
    with simulate(FAIL_CREATE_PERMANENT=1), committed():
        instance = launch(rich_alice, count=4)
    instance.refresh_from_db()
    assert instance.status == S.FAILED
    assert "could not allocate 4 × a800-80g" in instance.status_reason_text
    assert instance.events.last().reason_text == instance.status_reason_text
    assert instance.node is None
    assert all(n.free_cards == n.total_cards for n in Node.objects.all())


def test_a_machine_that_never_boots_fails_after_the_timeout_and_is_destroyed(rich_alice, settings):
    with simulate(HANG_CREATE=1), committed():
        instance = launch(rich_alice)
    instance.refresh_from_db()
    assert instance.status == S.PROVISIONING
    Instance.objects.filter(pk=instance.pk).update(
        status_changed_at=timezone.now() - timedelta(seconds=settings.INSTANCES_PROVISION_TIMEOUT_S + 1)
    )
    instance_sync(instance_id=instance.pk)
    instance.refresh_from_db()
    assert instance.status == S.FAILED
    assert "did not boot" in instance.status_reason_text
    assert get_backend("default").machines() == []


def test_an_unreachable_provider_changes_nothing(rich_alice):
    with committed():
        instance = launch(rich_alice)
    with simulate(UNREACHABLE=True):
        assert instances_reconcile()["unreachable"] == ["default"]
        instance_sync(instance_id=instance.pk)
    instance.refresh_from_db()
    assert instance.status == S.RUNNING


def test_an_outage_switched_on_and_off_from_outside_reaches_every_call(rich_alice, tmp_path):
    """The chaos soak's switch: the cloud is unreachable while the file exists, whichever process asks."""
    switch = tmp_path / "simulated-unreachable"
    with committed():
        instance = launch(rich_alice)
    with simulate(UNREACHABLE_FILE=str(switch)):
        assert instances_reconcile()["unreachable"] == []
        switch.touch()
        assert instances_reconcile()["unreachable"] == ["default"]
        with pytest.raises(TransientBackendError):
            get_backend("default").machines()
        switch.unlink()
        assert instances_reconcile()["unreachable"] == []
    instance.refresh_from_db()
    assert instance.status == S.RUNNING


def test_a_lost_node_marks_its_instances_lost_with_the_reason_and_stops_billing(rich_alice):
    from billing.models import Meter

    with committed():
        instance = launch(rich_alice)
    instance.refresh_from_db()
    get_backend("default").node_lose(name=instance.node.name)

    with committed():
        instances_reconcile()

    instance.refresh_from_db()
    assert instance.status == S.LOST
    assert "was lost" in instance.status_reason_text
    assert not Meter.objects.filter(ref__startswith=f"instance:{instance.pk}", stopped_at__isnull=True).exists()
    assert Node.objects.get(name=instance.events.get(new=S.PROVISIONING).reason_text.split()[-1]).is_healthy is False


def test_a_node_lost_by_settings_takes_no_placements_and_loses_its_machines(rich_alice):
    with committed():
        instance = launch(rich_alice, count=8)
    instance.refresh_from_db()
    lost = instance.node.name
    with simulate(LOST_NODES=[lost]), committed():
        instances_reconcile()
        instance.refresh_from_db()
        assert instance.status == S.LOST
        assert Node.objects.get(name=lost).is_healthy is False
        placed = launch(rich_alice, count=8)
    assert placed.node.name != lost
