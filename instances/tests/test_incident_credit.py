"""A service credit per incident (``INSTANCES_INCIDENT_CREDIT_FEN``): a node fails under a running
instance whose disk follows it; its owner is credited once per interruption, through the ledger, on the
timeline and in the inbox. Off by default."""

import pytest

from billing.models import Transaction
from billing.selectors import balance_get
from billing.services import ledger_check
from instances.capacity.incidents import incident_credit
from instances.models import Instance, InstanceEvent
from instances.reconciler import instances_reconcile
from instances.tests.conftest import backends, committed, running
from notifications.models import Kind, Notification
from providers import get_backend
from providers.simulated.models import SimulatedNode

S = Instance.Status


@pytest.fixture
def disks_follow(settings):
    settings.PROVISIONING_BACKENDS = backends(DISK_FOLLOWS=True)
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    settings.INSTANCES_INCIDENT_CREDIT_FEN = 500


def reconcile():
    with committed():
        return instances_reconcile()


def _credits(user) -> list[Transaction]:
    return list(Transaction.objects.filter(user=user, kind=Transaction.Kind.ADJUSTMENT))


def test_a_node_failure_that_restarts_the_instance_elsewhere_credits_its_owner_once(rich_alice, disks_follow):
    instance = running(rich_alice, count=2)
    failed = instance.node.name
    before = balance_get(user=rich_alice).cash
    get_backend("default").node_lose(name=failed)
    reconcile()
    reconcile()  # the same incident seen again: nothing more
    instance.refresh_from_db()
    assert instance.status == S.RUNNING
    [credit] = _credits(rich_alice)
    assert credit.metadata == {"instance": str(instance.pk), "incident": "node_failure", "nodes": failed}
    assert balance_get(user=rich_alice).cash - before == 500  # usage of the few seconds aside: none here
    assert ledger_check().ok
    said = [e.reason_text for e in instance.events.filter(kind=InstanceEvent.Kind.NODE)]
    assert any("Credited ¥5.00 for the interruption" in text and failed in text for text in said)
    [note] = Notification.objects.filter(user=rich_alice, kind=Kind.INCIDENT_CREDIT)
    assert "¥5.00" in note.title and instance.name in note.title


def test_the_same_incident_is_credited_once_whoever_records_it(rich_alice, disks_follow):
    instance = running(rich_alice, count=2)
    get_backend("default").node_lose(name=instance.node.name)
    reconcile()
    instance.refresh_from_db()
    # A worker that read the instance before the move (the same interrupted run) credits nothing more.
    stale = Instance.objects.select_related("owner").get(pk=instance.pk)
    stale.running_since = instance.events.filter(new=S.RUNNING).order_by("created_at").first().created_at
    assert incident_credit(instance=stale, status=S.STARTING, failed="x") is False
    assert len(_credits(rich_alice)) == 1


def test_a_second_failure_of_a_later_run_is_a_second_incident(rich_alice, disks_follow):
    instance = running(rich_alice, count=2)
    get_backend("default").node_lose(name=instance.node.name)
    reconcile()
    instance.refresh_from_db()
    assert instance.status == S.RUNNING
    get_backend("default").node_lose(name=instance.node.name)
    reconcile()
    instance.refresh_from_db()
    assert len(_credits(rich_alice)) == 2
    assert Notification.objects.filter(user=rich_alice, kind=Kind.INCIDENT_CREDIT).count() == 2


def test_waiting_for_room_after_a_failure_is_credited_too(rich_alice, disks_follow):
    instance = running(rich_alice, gpu="h800", count=8)  # the only H800 node
    node = instance.node.name
    get_backend("default").node_lose(name=node)
    reconcile()
    instance.refresh_from_db()
    assert instance.status == S.PREEMPTED
    assert len(_credits(rich_alice)) == 1
    SimulatedNode.objects.filter(name=node).update(is_lost=False)
    reconcile()  # back by itself: the same incident, nothing more
    instance.refresh_from_db()
    assert instance.status == S.RUNNING
    assert len(_credits(rich_alice)) == 1


def test_no_credit_when_the_setting_is_off(rich_alice, disks_follow, settings):
    settings.INSTANCES_INCIDENT_CREDIT_FEN = 0
    instance = running(rich_alice, count=2)
    get_backend("default").node_lose(name=instance.node.name)
    reconcile()
    instance.refresh_from_db()
    assert instance.status == S.RUNNING
    assert _credits(rich_alice) == []
    assert not Notification.objects.filter(kind=Kind.INCIDENT_CREDIT).exists()


def test_a_lost_instance_whose_disk_cannot_follow_gets_no_credit_here(rich_alice, settings):
    settings.INSTANCES_INCIDENT_CREDIT_FEN = 500
    instance = running(rich_alice, count=2)
    get_backend("default").node_lose(name=instance.node.name)
    reconcile()
    instance.refresh_from_db()
    assert instance.status == S.LOST
    assert _credits(rich_alice) == []
