"""Idle auto-stop on the real Slurm cluster, driven by what the job reports: the job's sampler runs an
``nvidia-smi`` (the recording of an 8-card host whose first cards are idle) on its node, signs the
figures into its report, the console collects them, and auto-stop cancels the job. The five idle
minutes the rule needs are compressed: the samples the job really reported are moved back in time, and
so is the servers' record of their last use (the job reports that too, and any sign of use counts),
then one more fresh collection (the judgement needs a recent sample) precedes the check. A run without
GPU has no samples: the job's word on its servers' use is what stops it."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db.models import F
from django.utils import timezone

from instances.models import Instance
from instances.services import (
    instance_auto_stop_set,
    instance_start,
    instance_stop,
    instance_sync,
    instances_auto_stop,
)
from instances.tests.conftest import committed, launch
from metrics.models import CardSample
from metrics.services import metrics_collect
from metrics.tests.test_idle_stop_engines import NVIDIA_SMI_SCRIPT
from providers import get_backend
from providers.local.tests.local_helpers import wait_running, wait_until

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]

S = Instance.Status
RECORDINGS = Path(__file__).resolve().parents[3] / "metrics" / "tests" / "recordings"


def test_idle_cards_reported_by_the_job_stop_the_instance(on_slurm, rich_alice, slurm_tmp_path):
    smi = slurm_tmp_path / "nvidia-smi"  # the tenant's job runs it
    smi.write_text(NVIDIA_SMI_SCRIPT.format(recordings=RECORDINGS))
    smi.chmod(0o755)
    on_slurm(services=(), NVIDIA_SMI=str(smi))
    with committed():
        instance = launch(rich_alice, gpu="h200", region="slurm-local", name="idle")
    wait_running(instance, timeout=90)
    instance_auto_stop_set(instance=instance, idle_minutes=5)

    def collected() -> int:
        metrics_collect()
        return CardSample.objects.filter(instance_id=instance.pk).count()

    wait_until(collected, timeout=60, interval=2, what="the job's first GPU report")
    backend = get_backend("slurm")
    _servers_unused_for(backend, instance, seconds=400)  # nobody used the servers either
    assert set(CardSample.objects.filter(instance_id=instance.pk).values_list("utilization_pct", flat=True)) == {0}
    # Six minutes compressed: the job's real samples moved back, the boot before them.
    CardSample.objects.filter(instance_id=instance.pk).update(at=F("at") - timedelta(minutes=6))
    Instance.objects.filter(pk=instance.pk).update(running_since=timezone.now() - timedelta(minutes=30))
    wait_until(lambda: metrics_collect() and collected(), timeout=30, interval=1, what="a fresh report")
    metrics_collect(now=timezone.now())  # the tick of now
    with committed():
        assert instances_auto_stop() == 1

    def stopped() -> bool:
        instance_sync(instance_id=instance.pk)
        instance.refresh_from_db()
        return instance.status == S.STOPPED

    wait_until(stopped, timeout=90, interval=1, what="the job to end")
    assert "idle for 5 minutes" in instance.events.get(new=S.STOPPING).reason_text


def test_a_run_without_gpu_is_stopped_when_nobody_has_used_its_servers(on_slurm, rich_alice, slurm_tmp_path):
    """No GPU samples at all (no-GPU mode): the job's own word on when its servers were last used, in
    its report, is what idle stop judges by."""
    backend = on_slurm(services=())
    with committed():
        instance = launch(rich_alice, gpu="h200", region="slurm-local", name="cpu-idle")
    wait_running(instance, timeout=90)
    with committed():
        instance_stop(instance=instance)
    wait_until(lambda: _status(instance) == S.STOPPED, timeout=90, interval=1, what="the stop")
    with committed():
        instance_start(instance=Instance.objects.get(pk=instance.pk), no_gpu=True)
    wait_running(instance, timeout=90)
    instance.refresh_from_db()
    assert instance.no_gpu
    instance_auto_stop_set(instance=instance, idle_minutes=5)

    def idle() -> int | None:
        instance.refresh_from_db()
        return backend.poll(key=instance.key, state=instance.backend_state).idle_seconds

    wait_until(lambda: idle() is not None, timeout=60, interval=1, what="the job's first word on activity")
    assert idle() < 120  # it has only just started
    with committed():
        assert instances_auto_stop() == 0
    _servers_unused_for(backend, instance, seconds=400)
    with committed():
        assert instances_auto_stop() == 1
    wait_until(lambda: _status(instance) == S.STOPPED, timeout=90, interval=1, what="the job to end")
    assert "idle for 5 minutes" in instance.events.filter(new=S.STOPPING).last().reason_text


def _servers_unused_for(backend, instance: Instance, *, seconds: int) -> None:
    """Compress time for the job's own word on use: its servers' record of their last use is moved back
    (the job's runtime reads it), then wait for the job's next report to say so."""
    (backend.root / instance.key / "run" / "activity.json").write_text(
        json.dumps({"last_active": time.time() - seconds})
    )

    def reported() -> bool:
        instance.refresh_from_db()
        idle = backend.poll(key=instance.key, state=instance.backend_state).idle_seconds
        return idle is not None and idle >= seconds - 10

    wait_until(reported, timeout=60, interval=1, what="the job to report its servers unused")


def _status(instance: Instance) -> str:
    instance_sync(instance_id=instance.pk)
    instance.refresh_from_db()
    return instance.status
