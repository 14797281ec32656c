"""Idle auto-stop on every engine, judged from the GPU samples each engine's own collection path
stores (``metrics_collect`` every 15 s), with the provider's own sign of use taken away, so only the
samples can stop it: the simulated cloud's series, this host's ``nvidia-smi`` (a recording, run as
the binary), Slurm's reports (signed by the job, read by the real backend over a fake Slurm) and
Kubernetes' DCGM exporter (a recording served by the fake API server). Idle cards stop the instance;
busy ones keep it running.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from instances.catalogue import catalogue_seed
from instances.models import Instance
from instances.services import instance_auto_stop_set, instance_sync, instances_auto_stop
from instances.tests.conftest import SMALL_FLEET, committed, launch, running
from metrics.models import CardSample
from metrics.services import metrics_collect
from providers.kubernetes import instance_name
from providers.kubernetes.tests.test_kubernetes_console import cluster, running_on_kubernetes  # noqa: F401  (the fixture)
from providers.local.backend import LocalBackend
from providers.simulated.backend import SimulatedBackend
from providers.simulated.gpus import STRETCH_S, stretch_is_idle
from providers.slurm.backend import SlurmBackend
from providers.slurm.tests.slurm_fake import FakeSlurm, FakeTenantAccounts

S = Instance.Status
RECORDINGS = Path(__file__).parent / "recordings"
# An nvidia-smi that answers each of the two queries with its recording.
NVIDIA_SMI_SCRIPT = """#!/bin/sh
case "$1" in
  --query-compute-apps=*) cat {recordings}/nvidia-smi-apps-8xH200.csv ;;
  *) cat {recordings}/nvidia-smi-sample-8xH200.csv ;;
esac
"""
IDLE_MINUTES = 5  # the shortest rule: the stop comes after 5 idle minutes
WINDOW = timedelta(minutes=7)  # the samples collected before the check


def _collect(until: datetime) -> None:
    """The beat's collection, every 15 s over ``WINDOW`` up to ``until``."""
    ticks = int(WINDOW.total_seconds()) // 15
    for i in range(ticks, -1, -1):
        metrics_collect(now=until - timedelta(seconds=15 * i))


def _armed(instance: Instance, now: datetime) -> None:
    instance_auto_stop_set(instance=instance, idle_minutes=IDLE_MINUTES)
    Instance.objects.filter(pk=instance.pk).update(running_since=now - timedelta(minutes=30))


def _judged(instance: Instance, now: datetime) -> str:
    # Every tick stored the machine's cards: the judgement reads the engine's samples.
    assert (
        CardSample.objects.filter(instance_id=instance.pk).values("at").distinct().count()
        == WINDOW // timedelta(seconds=15) + 1
    )
    with committed():
        instances_auto_stop(now=now)
    instance.refresh_from_db()
    return instance.status


# --- The simulated cloud: its own series, idle stretches included ----------------------------------------


class SimulatedReportsNoUse(SimulatedBackend):
    """The simulated cloud whose poll says nothing of use: only its GPU series can stop a machine."""

    def poll(self, *, key, state):
        return replace(super().poll(key=key, state=state), idle_seconds=None)


def _moment(key: str, *, idle: bool) -> datetime:
    """A moment at least ``WINDOW`` into a stretch of the machine's series that is idle (or busy)."""
    start = datetime.fromtimestamp(int(timezone.now().timestamp()) // STRETCH_S * STRETCH_S, tz=UTC)
    for n in range(1, 500):
        at = start - timedelta(seconds=STRETCH_S * n) + WINDOW + timedelta(minutes=1)
        if stretch_is_idle(key, at) is idle:
            return at
    raise AssertionError("no such stretch in 500")


@pytest.mark.parametrize("idle", [True, False])
def test_simulated_cloud(rich_alice, settings, idle):
    settings.PROVISIONING_BACKENDS = {
        "default": {
            "BACKEND": f"{__name__}.SimulatedReportsNoUse",
            "OPTIONS": {"FLEET": SMALL_FLEET, "BOOT_DELAY_S": 0},
        }
    }
    instance = running(rich_alice, count=2)
    now = _moment(instance.key, idle=idle)
    _armed(instance, now)
    _collect(now)
    assert _judged(instance, now) == (S.STOPPED if idle else S.RUNNING)


# --- This host: nvidia-smi, recorded, run as the binary ---------------------------------------------------


class _Runtime:
    """What ``LocalBackend.gpu_samples`` reads of its runtime: each machine holds ``CARDS`` of the host."""

    CARDS: list[str] = []

    def meta(self, key):
        return {"gpus": self.CARDS}

    def status(self, key):
        return type("Status", (), {"overall": "running"})()


class LocalCardsReportNoUse(SimulatedReportsNoUse):
    """The simulated lifecycle (this host's servers need not run here), with this host's GPU samples:
    ``LocalBackend.gpu_samples`` over the ``nvidia-smi`` in OPTIONS, the cards shared out per machine."""

    def gpu_samples(self, *, machines, at):
        host = LocalBackend(alias="local", options={"NVIDIA_SMI": self.options["NVIDIA_SMI"]})
        host.__dict__["runtime"] = _Runtime()
        return LocalBackend.gpu_samples(host, machines=machines, at=at)


@pytest.fixture
def recorded_nvidia_smi(tmp_path) -> str:
    """An ``nvidia-smi`` that prints the recording of an 8-card H200 host (cards 0, 1 idle; 2, 3 busy)."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text(NVIDIA_SMI_SCRIPT.format(recordings=RECORDINGS))
    smi.chmod(0o755)
    return str(smi)


@pytest.mark.parametrize(("cards", "stopped"), [(["0", "1"], True), (["2", "3"], False)])
def test_this_host_on_recorded_nvidia_smi(rich_alice, settings, monkeypatch, recorded_nvidia_smi, cards, stopped):
    monkeypatch.setattr(LocalBackend, "runtime", property(lambda self: _Runtime()), raising=False)
    monkeypatch.setattr(_Runtime, "CARDS", cards)
    settings.PROVISIONING_BACKENDS = {
        "default": {
            "BACKEND": f"{__name__}.LocalCardsReportNoUse",
            "OPTIONS": {"FLEET": SMALL_FLEET, "BOOT_DELAY_S": 0, "NVIDIA_SMI": recorded_nvidia_smi},
        }
    }
    instance = running(rich_alice, count=2)
    now = timezone.now()
    _armed(instance, now)
    _collect(now)
    assert _judged(instance, now) == (S.STOPPED if stopped else S.RUNNING)


# --- Slurm: the job's signed reports, read by the real backend over a fake Slurm ---------------------------

IDLE_CARD = {"utilization_pct": 0, "memory_used_mib": 4, "memory_total_mib": 143771, "power_w": 75, "temperature_c": 30}
BUSY_CARD = {**IDLE_CARD, "utilization_pct": 97, "memory_used_mib": 131072, "power_w": 612}


class FakeSlurmBackend(SlurmBackend):
    """The Slurm backend with the in-process Slurm behind its transport (the one seam)."""

    SLURM: FakeSlurm | None = None

    def __init__(self, *, alias, options=None):
        super().__init__(alias=alias, options=options)
        self.api = type(self).SLURM
        self.tenants = FakeTenantAccounts()


@pytest.fixture
def slurm_region(settings, tmp_path, catalogue):
    options = {
        "REGION": "slurm-1",
        "REGION_NAME": "Slurm",
        "ROOT": str(tmp_path / "slurm"),
        "SERVICES": [],
        "GPU_TYPES": {"h200": "h200"},
        # wall-clock: the fake ends a cancelled job at once, so the wait for its end is never waited out
        "END_WAIT_S": 1,
    }
    fake = FakeSlurm(prefix=SlurmBackend(alias="slurm", options=options).prefix, nodes=("gpu01", "gpu02"))
    FakeSlurmBackend.SLURM = fake
    settings.PROVISIONING_BACKENDS = {
        "default": {"BACKEND": "providers.simulated.backend.SimulatedBackend", "OPTIONS": {"FLEET": SMALL_FLEET}},
        "slurm": {"BACKEND": f"{__name__}.FakeSlurmBackend", "OPTIONS": options},
    }
    catalogue_seed()
    yield fake
    FakeSlurmBackend.SLURM = None


@pytest.mark.parametrize(("card", "stopped"), [(IDLE_CARD, True), (BUSY_CARD, False)])
def test_slurm_from_the_jobs_reports(rich_alice, slurm_region, card, stopped):
    with committed():
        instance = launch(rich_alice, gpu="h200", region="slurm-1")
    slurm_region.gpu_samples[str(instance.key)] = [[card]]
    slurm_region.advance()
    instance_sync(instance_id=instance.pk)
    instance.refresh_from_db()
    assert instance.status == S.RUNNING and instance.backend_alias == "slurm"
    now = timezone.now()
    _armed(instance, now)
    _collect(now)
    assert _judged(instance, now) == (S.STOPPED if stopped else S.RUNNING)


# --- Kubernetes: the DCGM exporter's metrics, recorded, through the API server's pod proxy -----------------


@pytest.mark.parametrize("stopped", [True, False])
def test_kubernetes_from_dcgm(rich_alice, cluster, stopped):  # noqa: F811
    instance = running_on_kubernetes(cluster, rich_alice, count=2)
    assert instance.status == S.RUNNING
    pod = f"{instance_name(instance.key)}-0"
    text = (RECORDINGS / "dcgm-exporter-5xH200.txt").read_text()
    if stopped:  # the recording's idle card (0 %) is this pod's; its busy ones (97 %, 41 %) another's
        text = text.replace('pod="{pod}"', 'pod="someone-else-0"').replace("inst-0b7e5d1c9a22-0", pod)
    else:
        text = text.replace("{pod}", pod)
    # The pod runs in its owner's namespace, as the exporter labels it.
    text = text.replace('namespace="gpu-console"', f'namespace="gpuc-user-{rich_alice.pk}"')
    for node in ("gpu-a", "gpu-b"):
        cluster.cluster.add_dcgm_exporter(node, text)
    now = timezone.now()
    _armed(instance, now)
    _collect(now)
    assert _judged(instance, now) == (S.STOPPED if stopped else S.RUNNING)
