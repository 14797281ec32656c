"""Waiting in line for cards: a start refused for lack of them starts by itself when cards free up."""

import pytest

from instances.capacity.start_queue import (
    instance_start_or_wait,
    instance_start_queue_leave,
    instances_start_queued,
)
from instances.errors import QuotaExceeded
from instances.models import Instance, Node
from instances.reconciler import instances_reconcile
from instances.selectors import instance_start_queue_position as start_queue_position
from instances.services import instance_release, instance_start, instance_stop
from instances.tests.conftest import committed, fund, running
from notifications.models import Kind, Notification

S = Instance.Status


@pytest.fixture
def alices(rich_alice, settings):
    """Two of alice's 8 × H800 instances, stopped (the small fleet has one H800 node of 8 cards)."""
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    made = []
    for _n in range(2):
        instance = running(rich_alice, gpu="h800", count=8)
        with committed():
            instance_stop(instance=instance)
        instance.refresh_from_db()
        made.append(instance)
    return made


@pytest.fixture
def bobs(alices, bob):
    """Bob's instance on the only H800 node, launched once alice's are stopped."""
    fund(bob, 1_000_000)
    return running(bob, gpu="h800", count=8)


def _free(instance: Instance) -> None:
    """Release ``instance`` as its owner would, the worker's tasks run (its cards go back)."""
    with committed():
        instance_release(instance=Instance.objects.get(pk=instance.pk))


def _started_news(instance: Instance) -> int:
    return Notification.objects.filter(user_id=instance.owner_id, kind=Kind.START_QUEUE).count()


def test_a_start_without_cards_can_wait_in_line_and_starts_by_itself_when_cards_free_up(alices, bobs):
    instance = alices[0]

    instance = instance_start_or_wait(instance=Instance.objects.get(pk=instance.pk))

    assert instance.status == S.STOPPED
    assert instance.start_queued_at is not None
    assert start_queue_position(instance) == 1
    assert instances_start_queued() == 0  # still no cards: it keeps waiting

    _free(bobs)

    instance.refresh_from_db()
    assert instance.status == S.RUNNING
    assert instance.start_queued_at is None
    assert start_queue_position(instance) is None
    assert _started_news(instance) == 1
    assert instance.events.filter(new=S.STARTING, reason__contains="started from the line").count() == 1


def test_the_reconcilers_pass_starts_a_queued_instance_once_cards_are_back(alices):
    instance = alices[0]
    Node.objects.filter(gpu_model__slug="h800").update(is_healthy=False)  # the only H800 node is out
    instance = instance_start_or_wait(instance=instance)
    assert instance.start_queued_at is not None

    Node.objects.filter(gpu_model__slug="h800").update(is_healthy=True)  # back, with no task to say so
    with committed():
        report = instances_reconcile()

    assert report["started_from_line"] == 1
    instance.refresh_from_db()
    assert instance.status == S.RUNNING
    assert _started_news(instance) == 1
    with committed():
        assert instances_reconcile()["started_from_line"] == 0  # a repeat starts nothing more
    assert _started_news(instance) == 1


def test_the_line_is_first_come_first_served(alices, bobs):
    first_launched, second_launched = alices
    later = instance_start_or_wait(instance=second_launched)  # joins first
    sooner = instance_start_or_wait(instance=first_launched)
    assert (start_queue_position(later), start_queue_position(sooner)) == (1, 2)

    _free(bobs)

    later.refresh_from_db()
    sooner.refresh_from_db()
    assert later.status == S.RUNNING
    assert sooner.status == S.STOPPED
    assert start_queue_position(sooner) == 1


def test_asking_again_while_in_line_keeps_its_place(alices, bobs):
    instance = instance_start_or_wait(instance=alices[0])
    since = instance.start_queued_at

    again = instance_start_or_wait(instance=instance)

    assert again.start_queued_at == since


def test_an_instance_that_left_the_line_is_not_started(alices, bobs):
    instance = instance_start_or_wait(instance=alices[0])

    instance = instance_start_queue_leave(instance=instance)
    assert instance.start_queued_at is None
    _free(bobs)

    instance.refresh_from_db()
    assert instance.status == S.STOPPED
    assert _started_news(instance) == 0


def test_starting_or_releasing_it_by_hand_leaves_the_line(alices, bobs):
    started, released = alices
    instance_start_or_wait(instance=started)
    instance_start_or_wait(instance=released)

    _free(bobs)  # the first in line starts: the second waits
    started.refresh_from_db()
    assert started.status == S.RUNNING
    with committed():
        instance_release(instance=Instance.objects.get(pk=released.pk))

    released.refresh_from_db()
    assert released.status == S.RELEASED
    assert released.start_queued_at is None


def test_a_start_by_hand_once_cards_are_free_takes_it_out_of_the_line(alices, bobs):
    instance = instance_start_or_wait(instance=alices[0])
    Node.objects.filter(gpu_model__slug="h800").update(free_cards=8)  # cards back, the line not yet run

    instance = instance_start(instance=Instance.objects.get(pk=instance.pk))

    assert instance.status == S.STARTING
    assert instance.start_queued_at is None


def test_when_the_balance_no_longer_covers_it_it_leaves_the_line_with_the_reason(alices, bobs, settings):
    instance = instance_start_or_wait(instance=alices[0])
    settings.BILLING_MIN_RUNWAY_S = 10**9  # no balance covers that long: the start is refused for money

    _free(bobs)

    instance.refresh_from_db()
    assert instance.status == S.STOPPED
    assert instance.start_queued_at is None
    assert "Taken out of the line" in instance.status_reason_text
    assert "balance" in instance.status_reason_text
    news = Notification.objects.get(user_id=instance.owner_id, kind=Kind.START_QUEUE)
    assert "left the line" in news.title
    assert "balance" in news.body


def test_a_refusal_that_is_not_for_cards_is_raised_and_does_not_queue(alices, bobs, settings):
    instance = alices[0]
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 4

    with pytest.raises(QuotaExceeded):
        instance_start_or_wait(instance=instance)

    instance.refresh_from_db()
    assert instance.start_queued_at is None
