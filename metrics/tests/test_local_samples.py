"""This host: GPU samples from ``nvidia-smi``, parsed from a recording, shared out by the cards each
instance holds; a host without the driver reports its simulated cards as idle."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from providers.base import GpuProcess, GpuSample, TransientBackendError
from providers.local import backend as local_backend
from providers.local.backend import LocalBackend
from providers.local.runtime.gpus import (
    NVIDIA_SMI_APPS_ARGS,
    NVIDIA_SMI_SAMPLE_ARGS,
    GpuApp,
    GpuDiscoveryError,
    GpuReading,
    gpu_read,
    parse_nvidia_smi_samples,
)

RECORDINGS = Path(__file__).parent / "recordings"
RECORDING = (RECORDINGS / "nvidia-smi-sample-8xH200.csv").read_text()
APPS = (RECORDINGS / "nvidia-smi-apps-8xH200.csv").read_text()
DRIVER_NOT_LOADED = (RECORDINGS / "nvidia-smi-driver-not-loaded.txt").read_text()
NOW = datetime(2026, 12, 1, 5, 0, tzinfo=UTC)


def _replay(text: str = "", *, returncode: int = 0, missing: bool = False, apps: str = ""):
    def runner(argv):
        if list(argv[1:]) == list(NVIDIA_SMI_APPS_ARGS):
            return subprocess.CompletedProcess(argv, 0, stdout=apps, stderr="")
        assert list(argv[1:]) == list(NVIDIA_SMI_SAMPLE_ARGS)
        if missing:
            raise FileNotFoundError(argv[0])
        return subprocess.CompletedProcess(
            argv, returncode, stdout=text if returncode == 0 else "", stderr="" if returncode == 0 else text
        )

    return runner


def test_every_card_is_read_with_its_power_and_temperature():
    readings = parse_nvidia_smi_samples(RECORDING)
    assert sorted(readings) == list(range(8))
    assert readings[3] == GpuReading(3, 100, 140221, 143771, 688, 76, uuid="GPU-0f4a8f2e-3b1d-8a77-5d6c-2e9b1c4d7a10")


def test_each_card_gets_the_processes_using_it():
    readings = gpu_read(runner=_replay(RECORDING, apps=APPS))
    assert readings[2].processes == (GpuApp(48211, "/opt/conda/bin/python3", 130880),)
    assert readings[3].processes == (GpuApp(48211, "/opt/conda/bin/python3", 139968),)  # one job on two cards
    assert readings[1].processes == (GpuApp(7301, "", 2),)  # another PID namespace: no name
    assert readings[0].processes == () and readings[7].processes == ()


def test_processes_the_driver_will_not_list_leave_the_figures_standing():
    def runner(argv):
        if list(argv[1:]) == list(NVIDIA_SMI_APPS_ARGS):
            return subprocess.CompletedProcess(argv, 2, stdout="", stderr="Not Supported")
        return subprocess.CompletedProcess(argv, 0, stdout=RECORDING, stderr="")

    readings = gpu_read(runner=runner)
    assert readings[2].utilization_pct == 97 and readings[2].processes == ()


def test_a_host_whose_driver_is_not_loaded_is_an_error_not_an_idle_host():
    with pytest.raises(GpuDiscoveryError, match="couldn't communicate with the NVIDIA driver"):
        gpu_read(runner=_replay(DRIVER_NOT_LOADED, returncode=9))


def test_not_available_figures_are_none_not_zero():
    reading = parse_nvidia_smi_samples(RECORDING)[6]
    assert reading.utilization_pct is None and reading.power_w is None
    assert reading.memory_used_mib == 0 and reading.temperature_c == 29


def test_a_host_without_the_driver_or_cards_has_nothing_to_read():
    assert gpu_read(runner=_replay(missing=True)) == {}
    assert gpu_read(runner=_replay("No devices were found", returncode=6)) == {}


def test_a_driver_that_answers_nonsense_is_an_error():
    with pytest.raises(GpuDiscoveryError):
        gpu_read(runner=_replay("0, 12\n"))
    with pytest.raises(GpuDiscoveryError):
        gpu_read(runner=_replay("NVIDIA-SMI has failed", returncode=9))


class _Status:
    def __init__(self, overall: str) -> None:
        self.overall = overall


class _Runtime:
    """The two runtime answers gpu_samples reads: each instance's meta (its cards) and status."""

    def __init__(self, metas: dict[str, dict], overall: dict[str, str]) -> None:
        self.metas, self.overall = metas, overall

    def meta(self, key):
        return self.metas.get(key)

    def status(self, key):
        return _Status(self.overall.get(key, "gone"))


@pytest.fixture
def host(monkeypatch, settings):
    backend = LocalBackend(alias="local", options={"NODE": "gpu-box-1"})
    runtime = _Runtime(
        {"a": {"gpus": ["2", "3"]}, "b": {"gpus": ["6"]}, "stopped": {"gpus": ["0"]}},
        {"a": "running", "b": "running", "stopped": "stopped"},
    )
    monkeypatch.setattr(LocalBackend, "runtime", property(lambda self: runtime))
    return backend


def test_each_instance_gets_its_own_cards_in_its_order(host, monkeypatch):
    monkeypatch.setattr(local_backend, "gpu_read", lambda **kw: gpu_read(runner=_replay(RECORDING, apps=APPS)))
    samples = host.gpu_samples(machines=[("a", {}), ("b", {}), ("stopped", {}), ("unknown", {})], at=NOW)
    assert set(samples) == {"a", "b"}
    python = "/opt/conda/bin/python3"
    assert samples["a"] == [
        GpuSample(
            card=0,
            utilization_pct=97,
            memory_used_mib=131072,
            memory_total_mib=143771,
            power_w=612,
            temperature_c=71,
            processes=(GpuProcess(48211, python, 130880),),
        ),
        GpuSample(
            card=1,
            utilization_pct=100,
            memory_used_mib=140221,
            memory_total_mib=143771,
            power_w=688,
            temperature_c=76,
            processes=(GpuProcess(48211, python, 139968),),
        ),
    ]
    assert samples["b"][0].utilization_pct is None  # [N/A]: unknown, never read as idle


def test_simulated_cards_report_idle(host, monkeypatch):
    monkeypatch.setattr(local_backend, "gpu_read", lambda **kw: {})
    monkeypatch.setattr(
        LocalBackend,
        "inventory",
        lambda self: type("I", (), {"gpus": [type("G", (), {"memory_total_mib": 143771})()]})(),
    )
    samples = host.gpu_samples(machines=[("b", {})], at=NOW)
    assert samples == {"b": [GpuSample(card=0, utilization_pct=0, memory_used_mib=0, memory_total_mib=143771)]}


def test_a_driver_error_is_transient(host, monkeypatch):
    def broken(**kw):
        raise GpuDiscoveryError("nvidia-smi did not answer within 20 s")

    monkeypatch.setattr(local_backend, "gpu_read", broken)
    with pytest.raises(TransientBackendError):
        host.gpu_samples(machines=[("a", {})], at=NOW)
