"""Every operation, run twice: the second run is harmless and changes nothing more."""

import pytest

from instances.errors import OperationNotAllowed
from instances.models import Instance, Node
from instances.services import (
    instance_auto_stop_set,
    instance_release,
    instance_rename,
    instance_restart,
    instance_start,
    instance_stop,
)
from instances.tests.conftest import committed, running
from providers import Observed, get_backend

S = Instance.Status


def _machine(instance):
    return get_backend("default").poll(key=instance.key, state=instance.backend_state).state


def test_stopping_twice_stops_once_and_frees_the_gpus(rich_alice):
    instance = running(rich_alice, count=4)
    node = instance.node
    with committed():
        instance_stop(instance=instance)
        instance_stop(instance=instance)
    instance.refresh_from_db()
    node.refresh_from_db()
    assert instance.status == S.STOPPED
    assert instance.node is None
    assert node.free_cards == 8
    assert _machine(instance) == Observed.STOPPED
    assert instance.events.filter(new=S.STOPPING).count() == 1
    assert instance.events.filter(new=S.STOPPED).count() == 1


def test_starting_twice_places_it_once_and_runs_it(rich_alice):
    instance = running(rich_alice, count=2)
    with committed():
        instance_stop(instance=instance)
    instance.refresh_from_db()
    with committed():
        instance_start(instance=instance)
        instance_start(instance=instance)
    instance.refresh_from_db()
    assert instance.status == S.RUNNING
    assert instance.events.filter(new=S.STARTING).count() == 1
    assert sum(8 - n.free_cards for n in Node.objects.filter(gpu_model__slug="a800-80g")) == 2


def test_restarting_twice_restarts_once_and_keeps_the_node(rich_alice):
    instance = running(rich_alice)
    node_id = instance.node_id
    with committed():
        instance_restart(instance=instance)
        instance_restart(instance=instance)
    instance.refresh_from_db()
    assert instance.status == S.RUNNING
    assert instance.node_id == node_id
    assert instance.events.filter(new=S.RESTARTING).count() == 1


def test_releasing_twice_destroys_once_and_frees_everything(rich_alice):
    instance = running(rich_alice, count=8)
    with committed():
        instance_release(instance=instance)
        instance_release(instance=instance)
    instance.refresh_from_db()
    assert instance.status == S.RELEASED
    assert _machine(instance) == Observed.GONE
    assert instance.events.filter(new=S.RELEASED).count() == 1
    assert all(n.free_cards == n.total_cards for n in Node.objects.all())


def test_renaming_twice_keeps_the_last_name(rich_alice):
    instance = running(rich_alice)
    instance_rename(instance=instance, name="training-1")
    instance_rename(instance=instance, name="training-1")
    instance.refresh_from_db()
    assert instance.name == "training-1"


def test_setting_auto_stop_twice_keeps_one_rule(rich_alice):
    instance = running(rich_alice)
    instance_auto_stop_set(instance=instance, idle_minutes=30)
    instance_auto_stop_set(instance=instance, idle_minutes=30)
    instance.refresh_from_db()
    assert instance.auto_stop_idle_minutes == 30


def test_a_released_instance_cannot_be_started(rich_alice):
    instance = running(rich_alice)
    with committed():
        instance_release(instance=instance)
    instance.refresh_from_db()
    with pytest.raises(OperationNotAllowed):
        instance_start(instance=instance)


def test_a_stopped_instance_cannot_be_restarted(rich_alice):
    instance = running(rich_alice)
    with committed():
        instance_stop(instance=instance)
    instance.refresh_from_db()
    with pytest.raises(OperationNotAllowed):
        instance_restart(instance=instance)


def test_cards_given_back_to_a_node_that_shrank_meanwhile_never_exceed_its_size(rich_alice):
    instance = running(rich_alice, count=8)
    Node.objects.filter(pk=instance.node_id).update(total_cards=4, free_cards=0)  # the provider shrank it
    with committed():
        instance_stop(instance=instance)
    instance.refresh_from_db()
    node = Node.objects.get(name=instance.events.get(new=S.PROVISIONING).reason_text.split()[-1])
    assert instance.status == S.STOPPED
    assert node.free_cards == 4
