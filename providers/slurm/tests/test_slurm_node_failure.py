"""A node of the real Slurm cluster dies under a running on-demand instance (its slurmd is killed with
SIGKILL) and the instance runs on another node, same ID and disk, with nothing but the reconciler's
passes driving the console, on the period beat runs them with under ``make run`` (the shipped
``CELERY_BEAT_SCHEDULE``, not a faster one), through slurmrestd as ``make run`` talks to the cluster.
No worker's follow-up polls help it here (eager tasks do not schedule them), so the time measured is
what the reconciler alone achieves: ``make run``'s worker can only make it shorter.

The goal: Running elsewhere at most 60 s after the kill. ``bench/node_failure.py`` runs this test and
reads the time it writes to ``NODE_FAILURE_REPORT``."""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

import psutil
import pytest
from django.conf import settings

from core.messages import shown
from instances.models import Instance, InstanceEvent, Node
from instances.reconciler import instances_reconcile
from instances.tests.conftest import committed, launch
from providers.local.tests.local_helpers import wait_running

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]

S = Instance.Status
GOAL_S = 60.0


def _servers_of(directory: Path) -> set[int]:
    """The pids of the instance's servers as its run recorded them."""
    pids = set()
    for path in (directory / "run").glob("*.pid"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            pids.add(int(json.loads(path.read_text())["pid"]))
    return pids


def _reconcile_period_s() -> float:
    """The reconciler's period as the shipped beat schedule has it (``make run``'s beat)."""
    return float(settings.CELERY_BEAT_SCHEDULE["instances-reconcile"]["schedule"])


def test_an_instance_whose_node_dies_runs_elsewhere_on_the_same_disk_within_a_minute(
    on_slurm, slurm_cluster, rich_alice
):
    on_slurm(rest=True, services=("lab",))
    with committed():
        instance = launch(rich_alice, gpu="h200", count=8, region="slurm-local", name="survivor")
    wait_running(instance, timeout=60)
    instance.refresh_from_db()
    dead, home = instance.backend_state["node"], instance.backend_state["dir"]
    old_run = (instance.backend_state["job_id"], instance.backend_state.get("restarts", 0))
    old_pids = _servers_of(Path(home))
    (instance_home := Path(home) / "home").joinpath("work.txt").write_text("kept")
    period = _reconcile_period_s()
    # Beat's phase against the failure is anyone's: its last pass came half a period before the kill.
    next_pass = time.monotonic() + period / 2
    seen: list[tuple[float, str, str]] = []

    killed = time.monotonic()
    slurm_cluster.node_kill(dead)
    try:
        while True:
            time.sleep(max(0.0, next_pass - time.monotonic()))  # wall-clock: beat's period, the point of the test
            next_pass += period
            with committed():
                instances_reconcile()
            instance.refresh_from_db()
            seen.append((round(time.monotonic() - killed, 1), instance.status, instance.status_reason))
            if instance.status == S.RUNNING and instance.node and instance.node.name != dead:
                break
            if time.monotonic() - killed > 5 * GOAL_S:
                pytest.fail(f"not running elsewhere {5 * GOAL_S:.0f} s after the kill: {seen}")
        recovered_s = time.monotonic() - killed
        print(f"\nnode {dead} killed -> running on {instance.node.name} after {recovered_s:.1f} s: {seen}")
        if report := os.environ.get("NODE_FAILURE_REPORT"):
            Path(report).write_text(json.dumps({"recovered_s": round(recovered_s, 1), "node": dead}))
        assert recovered_s <= GOAL_S, seen
        # A new run on the same directory: a new job, or Slurm's requeue of it (its restart count up).
        assert (instance.backend_state["job_id"], instance.backend_state.get("restarts", 0)) != old_run
        assert (instance_home / "work.txt").read_text() == "kept"  # the same disk
        assert Node.objects.get(backend_alias="slurm", name=dead).is_healthy is False
        events = list(instance.events.order_by("created_at").values_list("kind", "new", "reason", "created_at"))
        events = [(kind, new, shown(reason), at) for kind, new, reason, at in events]
        statuses = [(new, reason) for kind, new, reason, _at in events if kind == InstanceEvent.Kind.STATUS]
        # Never called preempted: an on-demand instance lost its node, and says so.
        assert S.PREEMPTED not in [new for new, _reason in statuses], statuses
        assert not any("reempt" in reason for _new, reason in statuses), statuses
        assert any(f"Node {dead} failed" in reason for _new, reason in statuses), statuses
        # Fencing: the run left on the "dead" node (its processes outlived its slurmd) stopped itself
        # once the new run held the disk, and the timeline says so, with its time.
        assert old_pids and not any(psutil.pid_exists(pid) for pid in old_pids), old_pids
        fenced = [
            (reason, at) for kind, _new, reason, at in events if kind == InstanceEvent.Kind.NODE and "left on" in reason
        ]
        assert len(fenced) == 1 and dead in fenced[0][0], events
        assert _servers_of(Path(home)).isdisjoint(old_pids)
    finally:
        slurm_cluster.node_start(dead)
