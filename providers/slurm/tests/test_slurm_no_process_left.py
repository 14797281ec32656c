"""On the test cluster, nothing of an instance outlives its job: cancelling the job (a stop) kills its
whole tree, a process its owner detached from the servers (``setsid nohup … &``) included, since
proctrack/cgroup tracks the job's cgroup and not its process tree; and stopping the whole cluster
(``scripts/slurm-cluster.sh stop``) cancels every job and waits until their processes are gone before
it stops the daemons. (The cluster is started again afterwards, for the tests that follow.)"""

from __future__ import annotations

import subprocess

import psutil
import pytest

from providers import InstanceSpec, Observed
from providers.local.tests.local_helpers import wait_until
from providers.slurm.tests.slurm_helpers import SCRIPT, cluster_or_skip, tenant

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]

# The owner's command inside the instance, detached from everything the job started.
DETACHED = "setsid nohup sleep 600 >/dev/null 2>&1 < /dev/null &"


def _processes_of(uid: int) -> list[psutil.Process]:
    """The processes of a Unix user, read in one pass: ``info`` holds what was read while each was
    alive, so one that ends meanwhile cannot raise ``NoSuchProcess`` later (a ``.name()`` call would)."""
    return [p for p in psutil.process_iter(["uids", "name"]) if p.info["uids"] and p.info["uids"].real == uid]


def _cluster_daemons() -> list[str]:
    """The cluster's own daemons still running: munged, slurmctld, the slurmds and slurmrestd all name a
    file of the cluster's folder (its config, or its munge socket) on their command lines."""
    base = str(SCRIPT.parent.parent.joinpath("var", "slurm").resolve())
    seen = []
    for p in psutil.process_iter(["cmdline", "name"]):
        line = " ".join(p.info["cmdline"] or [])
        if p.info["name"] in {"munged", "slurmctld", "slurmd", "slurmrestd"} and (
            base in line or "/run/console-slurm-" in line
        ):
            seen.append(f"{p.pid} {line}")
    return seen


def _running_with_a_detached_process(backend, key: str, owner) -> dict:
    spec = InstanceSpec(node="", gpu_model="h200", gpu_count=1, image="cuda", disk_gb=20, tenant=owner)
    seen = {"state": backend.create(key=key, spec=spec)}

    def running() -> bool:
        observation = backend.poll(key=key, state=seen["state"])
        seen["state"] = observation.backend_state or seen["state"]
        return observation.state == Observed.RUNNING

    wait_until(running, timeout=60, interval=0.2, what=f"{key} to run")
    assert backend.checkpoint(key=key, state=seen["state"], command=DETACHED, grace_s=5)
    wait_until(
        lambda: any("sleep" in (p.info["name"] or "") for p in _processes_of(owner.uid)),
        timeout=20,
        what="the detached process to start",
    )
    return seen["state"]


def test_cancelling_the_job_leaves_no_process_of_the_instance(on_slurm, slurm_cluster):
    backend = on_slurm(services=("lab",))
    owner = tenant(9005)
    state = _running_with_a_detached_process(backend, "no-orphans", owner)
    assert len(_processes_of(owner.uid)) >= 3  # the job program, JupyterLab, the detached sleep

    backend.stop(key="no-orphans", state=state)
    wait_until(lambda: not _processes_of(owner.uid), timeout=20, what="every process of the instance to end")
    assert slurm_cluster.active(f"{backend.prefix}no-orphans") == []


def test_stopping_the_cluster_leaves_no_process_of_any_instance(on_slurm, slurm_cluster):
    backend = on_slurm(services=("lab",))
    owners = (tenant(9006), tenant(9007))
    for n, owner in enumerate(owners):
        _running_with_a_detached_process(backend, f"cluster-stop-{n}", owner)
    try:
        done = subprocess.run([str(SCRIPT), "stop"], capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        # Nothing of the instances once the stop has returned: not waited for, it is the stop's promise.
        assert [p.pid for owner in owners for p in _processes_of(owner.uid)] == []
        assert "cancelling jobs" in done.stdout
        # Nor of the cluster: "stopped" once said so while slurmctld, the slurmds and slurmrestd ran on.
        assert _cluster_daemons() == []
    finally:
        subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, timeout=300, check=True)
    assert cluster_or_skip().node_state("gpu01") in ("idle", "mix", "alloc")
