"""Passes of the line of starts at once, on PostgreSQL with real threads: each queued instance is
started once (one STARTING event, one notice, its cards taken once), and the head of the line first."""

import pytest
from django.db import connection

from core.testing import race
from instances.capacity.start_queue import instance_start_or_wait, instances_start_queued
from instances.catalogue import catalogue_seed
from instances.models import Instance, Node
from instances.services import instance_stop
from instances.tests.conftest import committed, fund, running
from notifications.models import Kind, Notification

pytestmark = pytest.mark.django_db(transaction=True)
S = Instance.Status


def test_eight_passes_at_once_start_the_head_of_the_line_once(settings, django_user_model):
    if connection.vendor != "postgresql":
        pytest.skip("advisory locks are the point: PostgreSQL only")
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    catalogue_seed()
    alice = django_user_model.objects.create_user(email="alice@example.com", password="x" * 12)
    fund(alice, 1_000_000)
    queued = []
    for _n in range(2):
        instance = running(alice, gpu="h800", count=8)
        with committed():
            instance_stop(instance=instance)
        queued.append(instance)
    h800 = Node.objects.filter(gpu_model__slug="h800")
    h800.update(is_healthy=False)  # no cards: both wait in line, the second launched first
    for instance in reversed(queued):
        assert instance_start_or_wait(instance=Instance.objects.get(pk=instance.pk)).start_queued_at is not None
    h800.update(is_healthy=True)  # room for one of them

    won, refused, errors = race(lambda k: instances_start_queued(), threads=8)

    assert errors == [] and refused == []
    assert sorted(won) == [0] * 7 + [1]
    head, behind = (Instance.objects.get(pk=i.pk) for i in reversed(queued))
    assert head.status in (S.STARTING, S.RUNNING) and head.start_queued_at is None
    assert behind.status == S.STOPPED and behind.start_queued_at is not None
    assert head.events.filter(new=S.STARTING).count() == 1
    assert Notification.objects.filter(user=alice, kind=Kind.START_QUEUE).count() == 1
    assert h800.get().free_cards == 0
    assert sum(Instance.objects.filter(node__in=h800).values_list("gpu_count", flat=True)) == 8


def test_eight_passes_at_once_with_room_for_all_start_each_once(settings, django_user_model):
    if connection.vendor != "postgresql":
        pytest.skip("advisory locks are the point: PostgreSQL only")
    catalogue_seed()
    alice = django_user_model.objects.create_user(email="alice@example.com", password="x" * 12)
    fund(alice, 1_000_000)
    queued = []
    for _n in range(3):
        instance = running(alice, gpu="a800-80g", count=1)
        with committed():
            instance_stop(instance=instance)
        queued.append(instance)
    a800 = Node.objects.filter(gpu_model__slug="a800-80g", region__slug="cn-north-1")
    a800.update(is_healthy=False)
    for instance in queued:
        instance_start_or_wait(instance=Instance.objects.get(pk=instance.pk))
    a800.update(is_healthy=True)  # 16 free cards: room for all three, and for a second pass to try too

    won, refused, errors = race(lambda k: instances_start_queued(), threads=8)

    assert errors == [] and refused == []
    assert sum(won) == 3
    for instance in queued:
        assert Instance.objects.get(pk=instance.pk).events.filter(new=S.STARTING).count() == 1
    assert Notification.objects.filter(user=alice, kind=Kind.START_QUEUE).count() == 3
    assert sum(a800.values_list("free_cards", flat=True)) == 16 - 3
