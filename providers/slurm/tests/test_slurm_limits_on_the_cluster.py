"""On the test cluster, an instance's job asks Slurm for the catalogue's cores and memory (capped for
this small host), Slurm's cgroups enforce them, and a process of the instance that goes over its
memory is killed by the kernel: the instance says so on its timeline, and the console has it go on."""

from __future__ import annotations

import pytest

from instances.models import InstanceEvent
from instances.services import instance_sync
from instances.tests.conftest import committed, launch
from providers.local.tests.local_helpers import wait_running, wait_until

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]

# The owner's command, run inside the instance (the checkpoint command runs there, in its environment):
# half a GiB over the instance's 1 GiB.
HOG = "/usr/bin/python3 -c 'x = bytearray(1536 << 20); print(len(x))'"


def test_an_instance_gets_its_cores_and_memory_and_a_process_over_its_memory_is_killed_and_reported(
    on_slurm, slurm_cluster, rich_alice
):
    backend = on_slurm(services=(), MAX_CPUS=2, MAX_MEMORY_GB=1)
    with committed():
        instance = launch(rich_alice, gpu="h200", count=1, region="slurm-local", name="hungry")
    wait_running(instance, timeout=60)
    job = slurm_cluster.job(instance.backend_state["job_id"])
    # The catalogue's CPU and RAM for one card, capped by the backend's options for this host.
    assert (job["cpus"], job["memory_per_node"]) == (2, 1024)
    assert "mem=1G" in job["tres_alloc_str"]

    assert backend.checkpoint(key=instance.key, state=instance.backend_state, command=HOG, grace_s=5)

    def reported() -> bool:
        instance_sync(instance_id=instance.pk)
        return InstanceEvent.objects.filter(instance=instance, reason__contains="Out of memory").exists()

    wait_until(reported, timeout=30, interval=0.3, what="the instance to report the kill")
    event = InstanceEvent.objects.filter(instance=instance, reason__contains="Out of memory").get()
    assert "memory limit (1024 MiB)" in event.reason
    log = (backend._dir(instance.key) / "run" / "checkpoint.log").read_text()
    assert str(1536 << 20) not in log  # the hog never finished: it was killed, not given the memory

    # The console repaired it (the job acknowledges the kill): running again, on the same job.
    def running_again() -> bool:
        instance_sync(instance_id=instance.pk)
        instance.refresh_from_db()
        return (
            instance.status == "running"
            and backend.poll(key=instance.key, state=instance.backend_state).state == "running"
        )

    wait_until(running_again, timeout=30, interval=0.3, what="the instance to run again")
    assert slurm_cluster.job(instance.backend_state["job_id"])["job_state"] == "RUNNING"
