"""A node of the real Slurm cluster dies under a running instance (its slurmd is killed with SIGKILL)
and the instance runs on another node, same ID and disk, with nothing but the reconciler's passes
(here one a second) driving the console.

The test waits for that to happen, with a deadline far above what it takes, so a busy machine does not
fail it; how long it takes is a goal measured by `bench/node_failure.py` (which runs this test and reads
the time it writes to ``NODE_FAILURE_REPORT``). The cluster's timeouts (scripts/slurm-cluster.sh:
SlurmdTimeout=5, MessageTimeout=3, cred_expire=5) and the console's health check (the reconciler reads
node health from Slurm each pass) decide the time; the README's Slurm section has the figures."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from instances.models import Instance, Node
from instances.reconciler import instances_reconcile
from instances.tests.conftest import committed, launch
from instances.tests.local_helpers import wait_running

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]

S = Instance.Status
PATIENCE_S = 300  # the bench's goal is 90 s; this only ends a test whose instance never comes back


def test_an_instance_whose_node_dies_runs_elsewhere_on_the_same_disk(on_slurm, slurm_cluster, rich_alice):
    on_slurm(services=())
    with committed():
        instance = launch(rich_alice, gpu="h200", count=8, region="slurm-local", name="survivor")
    wait_running(instance, timeout=60)
    instance.refresh_from_db()
    dead, home = instance.backend_state["node"], instance.backend_state["dir"]
    old_job = instance.backend_state["job_id"]
    (instance_home := Path(home) / "home").joinpath("work.txt").write_text("kept")

    killed = time.monotonic()
    slurm_cluster.node_kill(dead)
    try:
        while True:
            with committed():
                instances_reconcile()
            instance.refresh_from_db()
            if instance.status == S.RUNNING and instance.node and instance.node.name != dead:
                break
            if time.monotonic() - killed > PATIENCE_S:
                pytest.fail(
                    f"not running elsewhere {PATIENCE_S} s after the kill: {instance.status}, {instance.status_reason}"
                )
            time.sleep(1)
        recovered_s = time.monotonic() - killed
        print(f"\nnode {dead} killed -> running on {instance.node.name} after {recovered_s:.1f} s")
        if report := os.environ.get("NODE_FAILURE_REPORT"):
            Path(report).write_text(json.dumps({"recovered_s": round(recovered_s, 1), "node": dead}))
        assert instance.backend_state["job_id"] != old_job  # a new job on the same directory
        assert (instance_home / "work.txt").read_text() == "kept"  # the same disk
        assert Node.objects.get(backend_alias="slurm", name=dead).is_healthy is False
        reasons = list(instance.events.values_list("reason", flat=True))
        assert any(dead in reason and "failed" in reason for reason in reasons), reasons
    finally:
        slurm_cluster.node_start(dead)
