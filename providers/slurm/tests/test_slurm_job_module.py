"""The program a Slurm job runs on its nodes: ``python -m providers.slurm.job``. It imports no Django
(compute nodes have the console's code, not its settings or database), and jobs queued under its
old name (``instances.slurm_job``) still run it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]  # the repository


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


def test_the_job_counts_the_kernels_oom_kills_in_its_cgroup_and_every_step_below_it(tmp_path):
    """Slurm's task/cgroup (v1) puts the job in ``slurm_<node>/uid_<uid>/job_<id>/step_<n>/task_<i>``;
    the kernel counts a kill in the victim's own cgroup, so the job sums its whole subtree."""
    from providers.slurm.job import job_memory_cgroup, memory_limit_mib, oom_kills

    proc = (
        "5:devices:/slurm_gpu01/uid_79001/job_31/step_0/task_0\n4:memory:/slurm_gpu01/uid_79001/job_31/step_0/task_0\n"
    )
    job = job_memory_cgroup(proc, mount=tmp_path)
    assert job == tmp_path / "slurm_gpu01/uid_79001/job_31"
    assert job_memory_cgroup("4:memory:/\n0::/\n", mount=tmp_path) is None  # no task/cgroup
    assert oom_kills(job) is None  # nothing to read: unknown, not zero
    for step, kills in (("step_0/task_0", 1), ("step_batch/task_0", 2)):
        (job / step).mkdir(parents=True)
        (job / step / "memory.oom_control").write_text(f"oom_kill_disable 0\nunder_oom 0\noom_kill {kills}\n")
    (job / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
    (job / "memory.limit_in_bytes").write_text(str(1 << 30))
    assert oom_kills(job) == 3
    assert memory_limit_mib(job) == 1024


def _run_of(job_module, run_dir: Path, *, job_id: str, restart: int, node: str):
    from types import SimpleNamespace

    step = object.__new__(job_module.Job)
    step.paths = SimpleNamespace(run=run_dir)
    step.rank, step.job_id, step.restart, step.node = 0, job_id, restart, node
    return step


def test_a_run_left_on_a_dead_node_is_fenced_once_a_later_run_claims_the_disk(tmp_path, monkeypatch):
    """Slurm requeued the job (same id, restart 1) on gpu02 while the first run's processes still ran on
    gpu01 (its slurmd died, they did not): the new run claims the disk and forgets the old servers'
    records; the old one sees the claim and stops, and a late start of the old run never begins."""
    from providers.slurm import job as job_module

    monkeypatch.setattr(job_module, "FENCE_WAIT_S", 0.0)
    old = _run_of(job_module, tmp_path, job_id="42", restart=0, node="gpu01")
    assert old.claim() and not old.fenced()
    (tmp_path / "lab.pid").write_text('{"pid": 1, "create_time": 0}')  # the old run's server, on gpu01

    new = _run_of(job_module, tmp_path, job_id="42", restart=1, node="gpu02")
    assert new.claim() and not new.fenced()
    assert old.fenced()
    assert not (tmp_path / "lab.pid").exists()
    assert not old.claim()  # a run that starts only now, superseded already, never starts
    later_job = _run_of(job_module, tmp_path, job_id="57", restart=0, node="gpu03")
    assert later_job.claim() and new.fenced()

    # A run that ended by itself (stopped) holds nothing: a cluster whose job ids began again (its
    # state wiped) still starts the instance.
    later_job.release()
    assert _run_of(job_module, tmp_path, job_id="3", restart=0, node="gpu01").claim()


def test_a_fenced_run_stops_its_own_processes_and_records_it(tmp_path):
    code = (
        "import subprocess, sys, json; from pathlib import Path; from types import SimpleNamespace\n"
        "from providers.slurm import job\n"
        "step = object.__new__(job.Job); step.paths = SimpleNamespace(run=Path(sys.argv[1]))\n"
        "step.rank, step.job_id, step.restart, step.node = 0, '42', 0, 'gpu01'\n"
        "child = subprocess.Popen(['sleep', '60'], start_new_session=True)\n"
        "step.fence(); print(child.wait(timeout=10))\n"
    )
    result = python("-c", code, str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "-9"  # its server (another session) was killed with it
    record = (tmp_path / "slurm-fenced-42-0-0.json").read_text()
    assert '"node": "gpu01"' in record


def test_a_reports_word_on_activity_is_the_idle_time_while_fresh_and_unknown_once_stale():
    from providers.slurm.job import ACTIVITY_CHECK_S
    from providers.slurm.reports import report_idle_seconds

    now = 1_000_000.0
    assert report_idle_seconds({"active_at": now - 400, "at": now - 5}, now=now) == 400
    assert report_idle_seconds({"active_at": now + 3, "at": now}, now=now) == 0  # a clock a little ahead
    assert report_idle_seconds({"active_at": None, "at": now}, now=now) is None  # the job has not asked yet
    assert report_idle_seconds({"at": now}, now=now) is None  # a job from before the field
    stale = {"active_at": now - 400, "at": now - 4 * ACTIVITY_CHECK_S - 1}
    assert report_idle_seconds(stale, now=now) is None  # the job stopped rewriting it: unknown, not idle
    assert report_idle_seconds({"active_at": "x", "at": now}, now=now) is None
