"""GPU discovery from nvidia-smi, on output recorded from real hosts, and simulated cards without one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from providers.local.runtime.gpus import (
    NVIDIA_SMI_APPS_ARGS,
    NVIDIA_SMI_ARGS,
    NVIDIA_SMI_SAMPLE_ARGS,
    GpuDiscoveryError,
    gpu_discover,
    gpu_read,
    parse_nvidia_smi_csv,
)

RECORDINGS = Path(__file__).parent / "recordings"


def _replay(name: str | None, *, returncode: int = 0, missing: bool = False):
    def runner(argv):
        assert list(argv[1:]) == list(NVIDIA_SMI_ARGS)
        if missing:
            raise FileNotFoundError(argv[0])
        text = (RECORDINGS / name).read_text() if name else ""
        return subprocess.CompletedProcess(
            argv, returncode, stdout=text if returncode == 0 else "", stderr="" if returncode == 0 else text
        )

    return runner


def test_an_8_h200_host_is_read_card_by_card():
    inventory = gpu_discover(runner=_replay("nvidia-smi-8xH200.csv"), simulated=4)
    assert not inventory.simulated
    assert [g.index for g in inventory.gpus] == list(range(8))
    assert {g.name for g in inventory.gpus} == {"NVIDIA H200"}
    assert inventory.model_slug == "h200"
    third = inventory.gpus[3]
    assert third.memory_total_mib == 143771
    assert third.utilization_pct == 100
    assert third.memory_used_mib == 140221
    assert third.uuid.startswith("GPU-") and len(third.uuid) == 40
    assert len({g.uuid for g in inventory.gpus}) == 8


def test_a_2_rtx_4090_workstation_with_an_unsupported_field():
    inventory = gpu_discover(runner=_replay("nvidia-smi-2xRTX4090.csv"))
    assert inventory.model_slug == "rtx-4090"
    assert [g.memory_total_mib for g in inventory.gpus] == [24564, 24564]
    assert inventory.gpus[1].utilization_pct is None  # "[N/A]" is unknown, not zero


def test_no_devices_offers_the_configured_simulated_cards():
    inventory = gpu_discover(runner=_replay("nvidia-smi-no-devices.txt", returncode=6), simulated=2)
    assert inventory.simulated
    assert "no devices" in inventory.detail
    assert [g.index for g in inventory.gpus] == [0, 1]
    assert all(g.simulated for g in inventory.gpus)


def test_a_host_without_the_driver_offers_simulated_cards():
    inventory = gpu_discover(runner=_replay(None, missing=True), simulated=3, simulated_name="NVIDIA GeForce RTX 4090")
    assert inventory.simulated
    assert "not found" in inventory.detail
    assert inventory.model_slug == "rtx-4090"
    assert len(inventory.gpus) == 3


def test_simulation_can_be_off():
    assert gpu_discover(runner=_replay(None, missing=True), simulated=0).gpus == ()


def test_a_failing_driver_is_an_error_not_an_empty_host():
    def runner(argv):
        return subprocess.CompletedProcess(
            argv, 9, stdout="", stderr="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
        )

    with pytest.raises(GpuDiscoveryError, match="couldn't communicate"):
        gpu_discover(runner=runner, simulated=8)


def test_a_malformed_line_is_an_error():
    with pytest.raises(GpuDiscoveryError, match="line 2"):
        parse_nvidia_smi_csv("0, GPU-1, NVIDIA H200, 143771, 0, 0\n1, GPU-2, NVIDIA H200\n")


def test_the_real_command_is_used_when_present(tmp_path):
    fake = tmp_path / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\ncat {RECORDINGS / 'nvidia-smi-2xRTX4090.csv'}\n")
    fake.chmod(0o755)
    inventory = gpu_discover(nvidia_smi=str(fake))
    assert len(inventory.gpus) == 2 and not inventory.simulated


def test_cards_are_given_to_one_instance_at_a_time(tmp_path):
    from providers.local.runtime.gpus import GpuRegistry, NotEnoughGpus

    cards = [str(i) for i in range(8)]
    registry = GpuRegistry(tmp_path / "gpus.json")
    assert registry.allocate("a", 2, cards) == ["0", "1"]
    assert registry.allocate("a", 2, cards) == ["0", "1"]  # a repeat holds the same cards
    assert registry.allocate("b", 4, cards) == ["2", "3", "4", "5"]
    with pytest.raises(NotEnoughGpus, match="4 GPUs asked for, 2 free"):
        registry.allocate("c", 4, cards)
    registry.release("a")
    assert registry.allocate("c", 4, cards) == ["0", "1", "6", "7"]


# Read on a lent H200 host (driver 580.159.04) by ``scripts/gpu_check.py``: idle, then while a PyTorch
# program kept the card busy and held 4 GiB. The console reads these through ``gpu_read``.
DEVICE = RECORDINGS / "h200-device-2026-12-04"


def _device_runner(sample: str):
    answers = {
        NVIDIA_SMI_ARGS: "nvidia-smi-query.csv",
        NVIDIA_SMI_SAMPLE_ARGS: f"nvidia-smi-sample-{sample}.csv",
        NVIDIA_SMI_APPS_ARGS: "nvidia-smi-apps-busy.csv" if sample == "busy" else None,
    }

    def runner(argv):
        name = answers[tuple(argv[1:])]
        text = (DEVICE / name).read_text() if name else ""
        return subprocess.CompletedProcess(argv, 0, stdout=text, stderr="")

    return runner


def test_a_real_h200_is_discovered_as_itself():
    inventory = gpu_discover(runner=_device_runner("idle"), simulated=4)
    assert not inventory.simulated and inventory.model_slug == "h200"
    (card,) = inventory.gpus
    assert card.memory_total_mib == 143771 and card.uuid == "GPU-a6e38d26-9ec4-fb6d-f24f-a24737662464"


def test_a_real_h200_reads_idle_then_busy_with_the_program_that_keeps_it_busy():
    idle = gpu_read(runner=_device_runner("idle"))[0]
    assert (idle.utilization_pct, idle.memory_used_mib, idle.power_w, idle.temperature_c) == (0, 0, 78, 37)
    assert idle.processes == ()
    busy = gpu_read(runner=_device_runner("busy"))[0]
    assert busy.utilization_pct == 100 and busy.memory_used_mib == 4979 and busy.power_w == 685
    assert [(p.pid, p.memory_used_mib) for p in busy.processes] == [(502, 4970)]
    assert busy.processes[0].name.endswith("python3")
