"""Without a cluster: how the Slurm backend submits the two tiers and reads a preempted or requeued job
(the real thing runs in ``providers/slurm/tests/test_slurm_preemption.py`` on ``make slurm``'s cluster)."""

from __future__ import annotations

from providers import Observed
from providers.slurm.tests.slurm_fake import cli_backend
from providers.slurm.tests.slurm_fake import spec as _spec

KEY = "6f1c2a9b-03de-4f00-9000-000000000002"


def _backend(tmp_path):
    return cli_backend(tmp_path, PARTITION="gpu")


def test_interruptible_machines_are_requeueable_spot_jobs_and_on_demand_ones_are_not(tmp_path):
    backend, cli = _backend(tmp_path)
    spot = backend.create(key=KEY, spec=_spec(interruptible=True, checkpoint_command="python save.py"))
    args = cli.calls[-1]
    assert "--partition=spot" in args and "--requeue" in args and "--open-mode=append" in args
    assert "--no-requeue" not in args
    assert spot["interruptible"] is True and spot["restarts"] == 0
    meta = (tmp_path / KEY / "run" / "meta.json").read_text()
    assert '"checkpoint_command": "python save.py"' in meta and '"interruptible": true' in meta

    backend.create(key="on-demand", spec=_spec())
    args = cli.calls[-1]
    assert "--partition=gpu" in args and "--no-requeue" in args and "--requeue" not in args


def test_a_job_in_its_grace_period_or_requeued_reads_as_preempted_and_a_first_queue_as_pending(tmp_path):
    backend, cli = _backend(tmp_path)
    state = backend.create(key=KEY, spec=_spec(interruptible=True))
    job = {"job_id": 42, "name": f"console-{KEY}", "partition": "spot", "nodes": "gpu01", "node_count": 1}

    cli.queue = [{**job, "job_state": "PENDING", "restart_cnt": 0, "state_reason": "Resources"}]
    assert backend.poll(key=KEY, state=state).state == Observed.PENDING  # not yet run: plain queueing

    cli.queue = [{**job, "job_state": "RUNNING", "restart_cnt": 0, "preempt_time": 1_800_000_000}]
    seen = backend.poll(key=KEY, state=state)
    assert seen.state == Observed.PREEMPTED and "checkpoint" in seen.detail

    cli.queue = [{**job, "job_state": "PENDING", "restart_cnt": 1, "state_reason": "BeginTime"}]
    seen = backend.poll(key=KEY, state=state)
    assert seen.state == Observed.PREEMPTED and "reason BeginTime" in seen.detail
    assert [m.observed for m in backend.machines() if m.key == KEY] == [Observed.PREEMPTED]

    # Its new run has not reported yet: the previous run's report (restart 0) does not make it RUNNING.
    cli.queue = [{**job, "job_state": "RUNNING", "restart_cnt": 1}]
    assert backend.poll(key=KEY, state=state).state == Observed.PENDING


def test_an_on_demand_job_requeued_after_its_node_failed_reads_as_the_node_lost_never_preempted(tmp_path):
    backend, cli = _backend(tmp_path)
    state = {**backend.create(key=KEY, spec=_spec()), "node": "gpu01"}
    submitted = len([c for c in cli.calls if c[0] == "sbatch"])
    job = {"job_id": 42, "name": f"console-{KEY}", "partition": "gpu", "nodes": "gpu02", "node_count": 1}

    for slurm_state in ("PENDING", "RUNNING"):  # requeued (slurmrestd's jobs are), waiting or already running
        cli.queue = [{**job, "job_state": slurm_state, "restart_cnt": 1, "state_reason": "BeginTime"}]
        seen = backend.poll(key=KEY, state=state)
        assert seen.state == Observed.GONE, slurm_state
        assert seen.detail == "Node gpu01 failed; restarting on another node"

    # The console's restart adopts Slurm's requeued run of the same job: no second job.
    started = backend.start(key=KEY, state=state, node="gpu03")
    assert started["job_id"] == 42 and started["restarts"] == 1
    assert len([c for c in cli.calls if c[0] == "sbatch"]) == submitted
    cli.queue = [{**job, "job_state": "PENDING", "restart_cnt": 1, "state_reason": "BeginTime"}]
    seen = backend.poll(key=KEY, state=started)
    assert seen.state == Observed.PENDING and "reempt" not in seen.detail


def test_slurm_disks_follow_node_loss_and_slurm_requeues_preempted_machines_itself(tmp_path):
    backend, _cli = _backend(tmp_path)
    assert backend.disk_follows_node_loss is True and backend.requeues_preempted is True


def test_the_console_checkpoint_asks_the_running_job_and_a_queued_one_cannot(tmp_path):
    backend, cli = _backend(tmp_path)
    state = backend.create(key=KEY, spec=_spec(interruptible=True))
    job = {"job_id": 42, "name": f"console-{KEY}", "partition": "spot", "nodes": "gpu01"}
    cli.queue = [{**job, "job_state": "PENDING"}]
    assert backend.checkpoint(key=KEY, state=state, command="python save.py", grace_s=30) is False
    cli.queue = [{**job, "job_state": "RUNNING"}]
    assert backend.checkpoint(key=KEY, state=state, command="python save.py", grace_s=30) is True
    assert backend.checkpoint(key=KEY, state=state, command="python save.py", grace_s=30) is True
    assert (tmp_path / KEY / "run" / "slurm-checkpoint").read_text() == "2"  # the job runs each request once

    # The console's preemption requeues an interruptible job (same id, back in the queue), never cancels it.
    backend.requeue(key=KEY, state=state)
    assert cli.calls[-1] == ("scontrol", "requeue", "42")
