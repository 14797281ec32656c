"""The program a Slurm job runs on its nodes: ``python -m providers.slurm.job``. It imports no Django
(compute nodes have the console's code, not its settings or database), and jobs queued under its
old name (``instances.slurm_job``) still run it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def python(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_the_job_program_imports_no_django():
    code = (
        "import sys, providers.slurm.job; "
        "print(sorted(m for m in sys.modules if m == 'django' or m.startswith('django.')))"
    )
    result = python("-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_job_program_runs_under_its_name_and_its_old_one():
    for module in ("providers.slurm.job", "instances.slurm_job"):
        result = python("-m", module, "--help")
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("usage: python -m providers.slurm.job")


def test_the_backend_submits_the_new_name(tmp_path):
    from providers.base import Tenant
    from providers.slurm.backend import SlurmBackend

    backend = SlurmBackend(alias="slurm", options={"ROOT": str(tmp_path), "SERVICES": []})
    tenant = Tenant(name="gpuc-t7", uid=70007, uid_base=1 << 24, uid_count=65536)
    script = backend._script("6f1c2a9b-03de-4f00-9000-000000000001", tenant=tenant)
    assert " -m providers.slurm.job " in script


def test_a_preempted_step_ends_at_slurms_second_sigterm_not_at_sruns_echo_of_the_first(monkeypatch):
    """After its checkpoint a preempted step waits for the end of the grace period (exiting earlier
    would end the job COMPLETED, not requeued). Slurm's requeue then sends SIGTERM again: the step
    goes at once, so the node is free long before Slurm would consider preempting a second job. The
    copy of the first SIGTERM that ``srun`` forwards moments later must not end the wait."""
    from providers.slurm import job as job_module

    clock = {"now": 100.0}
    monkeypatch.setattr(job_module.time, "monotonic", lambda: clock["now"])
    step = object.__new__(job_module.Job)
    step.stopping, step.terms = False, []

    step._on_term(15, None)  # the grace period begins
    clock["now"] += 0.02
    step._on_term(15, None)  # srun forwards it
    assert step.stopping and not step._killed()
    clock["now"] += 5.0
    step._on_term(15, None)  # the grace period is over: Slurm requeues the job
    assert step._killed()
