"""GPU discovery from nvidia-smi, on output recorded from real hosts, and simulated cards without one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from providers.local.runtime.gpus import NVIDIA_SMI_ARGS, GpuDiscoveryError, gpu_discover, parse_nvidia_smi_csv

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
