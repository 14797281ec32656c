import pytest

from core.statemachine import InvalidTransition
from instances.lifecycle import ALLOWED, instance_transition
from instances.models import Instance, InstanceEvent
from instances.tests.conftest import launch

S = Instance.Status

EVERY_ALLOWED = [(src, dst) for src, targets in ALLOWED.items() for dst in sorted(targets)]


@pytest.mark.parametrize(("src", "dst"), EVERY_ALLOWED)
def test_every_allowed_transition_moves_and_writes_one_event(rich_alice, src, dst):
    instance = launch(rich_alice)
    Instance.objects.filter(pk=instance.pk).update(status=src)
    before = InstanceEvent.objects.filter(instance=instance).count()

    assert instance_transition(instance_id=instance.pk, src=src, dst=dst, reason="because") is True

    instance.refresh_from_db()
    assert instance.status == dst
    assert instance.status_reason_text == "because"
    last = instance.events.last()
    assert (last.old, last.new, last.reason_text) == (src, dst, "because")
    assert InstanceEvent.objects.filter(instance=instance).count() == before + 1


def test_a_forbidden_transition_raises_and_changes_nothing(rich_alice):
    instance = launch(rich_alice)
    Instance.objects.filter(pk=instance.pk).update(status=S.RELEASED)
    with pytest.raises(InvalidTransition):
        instance_transition(instance_id=instance.pk, src=S.RELEASED, dst=S.RUNNING)
    instance.refresh_from_db()
    assert instance.status == S.RELEASED


def test_a_transition_someone_else_made_first_returns_false_quietly(rich_alice):
    instance = launch(rich_alice)
    Instance.objects.filter(pk=instance.pk).update(status=S.STOPPING)  # another worker moved it
    events = instance.events.count()
    assert instance_transition(instance_id=instance.pk, src=S.RUNNING, dst=S.STOPPING) is False
    assert instance.events.count() == events


def test_every_status_has_a_row_in_the_table_and_a_badge():
    assert set(ALLOWED) == set(S.values)
    assert set(Instance.BADGE_COLOURS) == set(S.values)
