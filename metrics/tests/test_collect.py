"""The worker's collection: one row per card of each running instance per tick, a repeat stores
nothing new, stopped instances and an unreachable provider give gaps, never errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.test import override_settings

from instances.models import Instance
from instances.tests.conftest import backends, running
from metrics.models import CardSample
from metrics.services import metrics_collect
from metrics.tasks import metrics_collect_task
from providers.simulated.gpus import simulated_sample

NOW = datetime(2026, 12, 1, 5, 0, 7, tzinfo=UTC)


def test_each_card_of_each_running_instance_is_stored_under_the_tick(rich_alice):
    two = running(rich_alice, count=2, gpu="h800")
    one = running(rich_alice, count=1)
    assert metrics_collect(now=NOW) == 3
    rows = CardSample.objects.order_by("instance_id", "card")
    assert {(str(r.instance_id), r.card) for r in rows} == {(two.key, 0), (two.key, 1), (one.key, 0)}
    assert {r.at for r in rows} == {datetime(2026, 12, 1, 5, 0, 0, tzinfo=UTC)}
    stored = CardSample.objects.get(instance_id=two.pk, card=1)
    expected = simulated_sample(key=two.key, card=1, at=stored.at, gpu_model="h800")
    assert (stored.utilization_pct, stored.memory_used_mib, stored.memory_total_mib, stored.power_w) == (
        expected.utilization_pct,
        expected.memory_used_mib,
        expected.memory_total_mib,
        expected.power_w,
    )


def test_a_repeat_within_the_tick_stores_nothing_new(rich_alice):
    running(rich_alice, count=2)
    metrics_collect(now=NOW)
    metrics_collect(now=NOW + timedelta(seconds=5))
    metrics_collect_task.apply()  # the task, at the real time: one more tick
    assert CardSample.objects.filter(at__lt=NOW + timedelta(seconds=15)).count() == 2


def test_the_next_tick_adds_a_row_per_card(rich_alice):
    running(rich_alice, count=2)
    metrics_collect(now=NOW)
    metrics_collect(now=NOW + timedelta(seconds=15))
    assert CardSample.objects.count() == 4


def test_stopped_instances_are_not_sampled(rich_alice):
    instance = running(rich_alice)
    Instance.objects.filter(pk=instance.pk).update(status=Instance.Status.STOPPED)
    assert metrics_collect(now=NOW) == 0
    assert not CardSample.objects.exists()


def test_an_unreachable_provider_leaves_a_gap(rich_alice):
    running(rich_alice)
    with override_settings(PROVISIONING_BACKENDS=backends(UNREACHABLE=True)):
        assert metrics_collect(now=NOW) == 0
    assert not CardSample.objects.exists()


def test_a_provider_without_gpu_samples_is_skipped(rich_alice, settings):
    running(rich_alice)
    from providers.simulated.backend import SimulatedBackend

    settings.PROVISIONING_BACKENDS = backends()
    original = SimulatedBackend.supports_gpu_samples
    try:
        SimulatedBackend.supports_gpu_samples = False
        assert metrics_collect(now=NOW) == 0
    finally:
        SimulatedBackend.supports_gpu_samples = original
