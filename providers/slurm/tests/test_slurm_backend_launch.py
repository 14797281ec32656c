"""An instance launched on the Slurm backend is a real job on the local cluster: its JupyterLab runs on
the node Slurm chose with the cards Slurm allocated, its owner reaches it through the console's proxy
(a stranger gets 404), stop cancels the job and keeps the directory, start submits again on the same
directory, and release leaves neither job nor directory."""

from __future__ import annotations

import json

import httpx
import psutil
import pytest
from django.test import Client

from console.tests.conftest import session_cookie
from instances.services import instance_release, instance_start, instance_stop
from instances.tests.conftest import committed, launch
from providers.local.runtime.supervisor import MARKER
from providers.local.tests.local_helpers import asgi_server, wait_running, wait_until
from providers.slurm.tests.slurm_helpers import PREFIX

pytestmark = [pytest.mark.slurm, pytest.mark.local, pytest.mark.django_db(transaction=True)]


def _lab_env(backend, key: str) -> dict:
    """The environment of the instance's running JupyterLab process (its pid file, written by the job)."""
    try:
        record = json.loads((backend._dir(key) / "run" / "lab.pid").read_text())
        process = psutil.Process(record["pid"])
        return process.environ() if process.environ().get(MARKER) == key else {}
    except (OSError, ValueError, psutil.Error):
        return {}


def test_a_slurm_instance_runs_on_its_allocation_and_is_reached_through_the_proxy(
    on_slurm, slurm_cluster, rich_alice, charlie
):
    backend = on_slurm(services=("lab",))
    # A neighbour holds the first three cards of every node, so the instance's cards are not 0 and 1.
    slurm_cluster.sbatch("--nodes=3", "--gres=gpu:h200:3", "--wrap=sleep 300", name="neighbour")
    with committed():
        instance = launch(rich_alice, gpu="h200", count=2, region="slurm-local", name="on-slurm")
    wait_running(instance)
    state = instance.backend_state
    job = slurm_cluster.job(state["job_id"])
    assert job["name"] == f"{PREFIX}{instance.key}" and job["job_state"] == "RUNNING"
    assert job["tres_per_node"] == "gres:gpu:h200:2"

    # The cards are the ones Slurm allocated, and the started JupyterLab has them.
    allocated = slurm_cluster.allocated_gpus(state["job_id"])
    assert len(allocated) == 2 and allocated != ["0", "1"]
    assert state["gpus"] == allocated
    assert state["node"] == job["nodes"] == instance.node.name
    # Within the job's device cgroup (ConstrainDevices) Slurm numbers its cards from 0.
    assert _lab_env(backend, instance.key)["CUDA_VISIBLE_DEVICES"] == "0,1"

    # The instance page shows where it runs.
    client = Client()
    client.force_login(rich_alice)
    page = client.get(f"/instances/{instance.pk}/?partial=body").content.decode()
    assert state["node"] in page and f"CUDA_VISIBLE_DEVICES={','.join(allocated)}" in page

    with asgi_server() as base_url:
        lab = f"{base_url}/i/{instance.pk}/lab/"
        owner = session_cookie(rich_alice)
        assert httpx.get(f"{lab}api/status", cookies=owner, timeout=10).status_code == 200
        assert httpx.get(f"{lab}api/status", cookies=session_cookie(charlie), timeout=10).status_code == 404
        home = backend._dir(instance.key) / "home"
        (home / "notes.txt").write_text("kept")

        with committed():
            instance_stop(instance=instance)
        wait_until(lambda: not slurm_cluster.active(f"{PREFIX}{instance.key}"), timeout=15, what="the job to end")
        instance.refresh_from_db()
        if instance.status != "stopped":  # the job was still winding down at the stop's own poll
            wait_until(lambda: _synced(instance) == "stopped", timeout=15, what="the instance to stop")
        assert _lab_env(backend, instance.key) == {}
        assert (home / "notes.txt").read_text() == "kept"
        assert httpx.get(f"{lab}api/status", cookies=owner, timeout=10).status_code == 404

        with committed():
            instance_start(instance=instance)
        wait_running(instance)
        assert instance.backend_state["job_id"] != state["job_id"]  # a new job, on the same directory
        assert (home / "notes.txt").read_text() == "kept"
        assert httpx.get(f"{lab}api/status", cookies=owner, timeout=10).status_code == 200

    with committed():
        instance_release(instance=instance)
    instance.refresh_from_db()
    assert instance.status == "released"
    assert slurm_cluster.active(f"{PREFIX}{instance.key}") == []
    assert not backend._dir(instance.key).exists()


def _synced(instance) -> str:
    from instances.services import instance_sync

    instance_sync(instance_id=instance.pk)
    instance.refresh_from_db()
    return instance.status
