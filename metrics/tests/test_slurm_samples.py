"""Slurm: each node of the job samples its cards with nvidia-smi and carries them in the report it
signs; the backend reads them from there, and the console's idle stop acts on them."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from metrics.tests.test_idle_stop_engines import NVIDIA_SMI_SCRIPT
from providers.base import GpuProcess, GpuSample, InstanceSpec, Tenant
from providers.local.runtime.gpus import parse_nvidia_smi_samples
from providers.slurm.backend import SlurmBackend, _processes
from providers.slurm.job import claim_read, job_cards, report_path
from providers.slurm.tests.slurm_fake import FakeSlurm, FakeTenantAccounts

RECORDING = (Path(__file__).parent / "recordings" / "nvidia-smi-sample-8xH200.csv").read_text()
KEY = "6f1c2a9b-03de-4f00-9000-000000000001"
NOW = datetime(2026, 12, 1, 5, 0, tzinfo=UTC)
BUSY = {
    "utilization_pct": 97,
    "memory_used_mib": 131072,
    "memory_total_mib": 143771,
    "power_w": 612,
    "temperature_c": 71,
}
IDLE = {"utilization_pct": 0, "memory_used_mib": 4, "memory_total_mib": 143771, "power_w": 75, "temperature_c": 30}


def test_the_job_takes_its_own_cards_of_the_node():
    readings = parse_nvidia_smi_samples(RECORDING)
    assert [r.index for r in job_cards(readings, ["3", "2"])] == [3, 2]  # CUDA_VISIBLE_DEVICES order


def test_with_device_cgroups_the_node_shows_only_the_job_s_cards_renumbered():
    readings = {i: r for i, r in parse_nvidia_smi_samples(RECORDING).items() if i < 2}
    assert [r.index for r in job_cards(readings, ["5", "6"])] == [0, 1]


def test_anything_else_is_not_the_job_s_to_report():
    readings = parse_nvidia_smi_samples(RECORDING)
    assert job_cards(readings, []) == []
    assert job_cards({0: readings[0]}, ["4", "5"]) == []
    assert job_cards(readings, ["GPU-6513270e"]) == []


@pytest.fixture
def slurm(tmp_path):
    backend = SlurmBackend(
        alias="slurm",
        # wall-clock: the fake ends a cancelled job at once, so the wait for its end is never waited out
        options={"ROOT": str(tmp_path / "slurm"), "SERVICES": [], "GPU_TYPES": {"h200": "h200"}, "END_WAIT_S": 1},
    )
    fake = FakeSlurm(prefix=backend.prefix, nodes=("gpu01", "gpu02"))
    backend.api = fake
    backend.tenants = FakeTenantAccounts()
    return backend, fake


def _running(backend, fake, *, nodes: int = 1) -> dict:
    tenant = Tenant("gpuc-t9001", 79001, 1 << 30, 65536)
    spec = InstanceSpec(node="gpu01", gpu_model="h200", gpu_count=1, image="x", disk_gb=10, nodes=nodes, tenant=tenant)
    state = backend.create(key=KEY, spec=spec)
    fake.advance()
    return backend.poll(key=KEY, state=state).backend_state or state


def test_the_backend_reads_the_samples_of_every_node_head_first(slurm):
    backend, fake = slurm
    fake.gpu_samples[KEY] = [[BUSY], [IDLE]]
    state = _running(backend, fake, nodes=2)
    assert backend.gpu_samples(machines=[(KEY, state), ("unknown-key", {})], at=NOW) == {
        KEY: [GpuSample(card=0, **BUSY), GpuSample(card=1, **IDLE)]
    }


def test_a_node_that_samples_nothing_leaves_the_machine_out(slurm):
    backend, fake = slurm
    fake.gpu_samples[KEY] = [[BUSY]]  # the second node has no driver
    state = _running(backend, fake, nodes=2)
    assert backend.gpu_samples(machines=[(KEY, state)], at=NOW) == {}


def test_stale_samples_are_not_the_present(slurm):
    backend, fake = slurm
    fake.gpu_samples[KEY] = [[IDLE]]
    fake.gpu_sampled_at = time.time() - 120  # the node stopped sampling two minutes ago
    state = _running(backend, fake)
    assert backend.gpu_samples(machines=[(KEY, state)], at=NOW) == {}


def test_a_report_the_tenants_user_did_not_write_is_ignored(slurm):
    backend, fake = slurm
    fake.gpu_samples[KEY] = [[BUSY]]
    state = _running(backend, fake)
    assert backend.gpu_samples(machines=[(KEY, state)], at=NOW) != {}
    backend.tenants.owns = lambda path, uid: False  # the kernel says another user wrote it
    assert backend.gpu_samples(machines=[(KEY, state)], at=NOW) == {}


def test_the_job_samples_on_its_node_and_puts_the_samples_in_its_report(tmp_path, monkeypatch):
    from providers.slurm.job import Job, parse_args

    smi = tmp_path / "nvidia-smi"
    smi.write_text(NVIDIA_SMI_SCRIPT.format(recordings=Path(__file__).parent / "recordings"))
    smi.chmod(0o755)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    monkeypatch.setenv("SLURM_JOB_ID", "1042")
    args = parse_args(
        [f"--root={tmp_path / 'root'}", f"--key={KEY}", "--services=", f"--nvidia-smi={smi}", f"--ports-dir={tmp_path}"]
    )
    from providers.local.runtime.supervisor import LocalRuntime

    run = LocalRuntime(root=args.root, services=[]).paths(KEY).run
    run.mkdir(parents=True)
    job = Job(args)
    assert job.sample_gpus() is True
    assert job.sample_gpus() is False  # not again before --gpu-sample-s
    job.report("running")
    report = claim_read(report_path(run, 0))
    assert [s["utilization_pct"] for s in report["gpu_samples"]] == [97, 100]
    assert [s["processes"] for s in report["gpu_samples"]] == [
        [[48211, "/opt/conda/bin/python3", 130880]],
        [[48211, "/opt/conda/bin/python3", 139968]],
    ]
    # The backend reads them from the report as the cards' processes.
    assert _processes(report["gpu_samples"][0]["processes"]) == (GpuProcess(48211, "/opt/conda/bin/python3", 130880),)
    assert report["gpu_at"] == pytest.approx(time.time(), abs=30)
