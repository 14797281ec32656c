"""The processes on each card: stored once per card (overwritten each tick, not a series), served with
the charts while fresh, pruned with the raw samples; another user's instance stays a 404."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from instances.tests.conftest import running
from metrics.models import CardProcesses
from metrics.selectors import instance_processes
from metrics.services import metrics_collect, metrics_prune


def test_each_tick_overwrites_the_cards_processes_and_the_api_serves_them(rich_alice, alice_client):
    instance = running(rich_alice, count=2)  # the simulated cloud: a process on each card
    now = timezone.now()
    metrics_collect(now=now - timedelta(seconds=15))
    metrics_collect(now=now)
    assert CardProcesses.objects.filter(instance_id=instance.pk).count() == 2  # one row per card, not per tick
    listed = instance_processes(instance_id=instance.pk, now=now)
    assert [p["card"] for p in listed] == [0, 1]
    assert all(p["pid"] > 0 and "python3" in p["name"] for p in listed)
    body = alice_client.get(f"/api/v1/instances/{instance.pk}/metrics/?range=15m").json()
    assert [p["card"] for p in body["processes"]] == [0, 1]


def test_stale_processes_are_not_shown_and_old_ones_are_pruned(rich_alice, settings):
    instance = running(rich_alice)
    old = timezone.now() - timedelta(hours=8)
    metrics_collect(now=old)
    assert instance_processes(instance_id=instance.pk) == []  # listed 8 hours ago: none now
    assert instance_processes(instance_id=instance.pk, now=old) != []
    metrics_collect()  # now
    metrics_collect(now=old + timedelta(minutes=1))  # a late collection does not put older ones back
    assert instance_processes(instance_id=instance.pk) != []
    CardProcesses.objects.update(at=old)
    metrics_prune()
    assert not CardProcesses.objects.exists()


def test_the_instance_page_has_the_processes_table(rich_alice, alice_client):
    instance = running(rich_alice)
    page = alice_client.get(f"/instances/{instance.pk}/").content.decode()
    assert "data-gpu-processes" in page and "Processes on the cards" in page


def test_a_stranger_gets_404(rich_alice, charlie_client):
    instance = running(rich_alice)
    metrics_collect()
    assert charlie_client.get(f"/api/v1/instances/{instance.pk}/metrics/?range=15m").status_code == 404
