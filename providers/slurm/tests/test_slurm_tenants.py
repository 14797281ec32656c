"""On the test cluster, each tenant's job runs as the tenant's own Unix user (made by the console with
its uid and subordinate range), its instance directory is the tenant's alone (0700), and from inside
one tenant's job another tenant's files cannot be read."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import psutil
import pytest

from providers import InstanceSpec, Observed
from providers.local.tests.local_helpers import wait_until
from providers.slurm.tests.slurm_helpers import tenant

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]


def _spec(owner) -> InstanceSpec:
    return InstanceSpec(node="", gpu_model="h200", gpu_count=1, image="cuda", disk_gb=20, tenant=owner)


def _running(backend, key, state) -> dict:
    seen = {"state": state}

    def check():
        observation = backend.poll(key=key, state=seen["state"])
        seen["state"] = observation.backend_state or seen["state"]
        return observation.state == Observed.RUNNING

    wait_until(check, timeout=30, interval=0.2, what=f"{key} to run")
    return seen["state"]


def _inside(slurm_cluster, owner, job_id: int, *argv: str) -> subprocess.CompletedProcess:
    """Run ``argv`` as a step of the job, as its tenant (what the tenant's own shell there can do)."""
    return subprocess.run(
        ["runuser", "-u", owner.name, "--", "srun", f"--jobid={job_id}", "--overlap", "-N1", "-n1", *argv],
        capture_output=True,
        text=True,
        env=slurm_cluster.env,
        timeout=30,
        check=False,
    )


def test_each_tenant_s_job_runs_as_its_own_user_and_cannot_read_another_tenant_s_files(on_slurm, slurm_cluster):
    backend = on_slurm(services=())
    alice, bob = tenant(9001), tenant(9002)
    a = _running(backend, "tenant-a", backend.create(key="tenant-a", spec=_spec(alice)))
    b = _running(backend, "tenant-b", backend.create(key="tenant-b", spec=_spec(bob)))

    for owner, state, key in ((alice, a, "tenant-a"), (bob, b, "tenant-b")):
        job = slurm_cluster.job(state["job_id"])
        assert (job["user_name"], job["user_id"]) == (owner.name, owner.uid)
        # The job's own program runs as the tenant, not as root.
        programs = [
            p
            for p in psutil.process_iter(["cmdline", "uids"])
            if "providers.slurm.job" in " ".join(p.info["cmdline"] or ()) and f"--key={key}" in p.info["cmdline"]
        ]
        assert programs and {p.info["uids"].real for p in programs} == {owner.uid}
        for path in (backend._dir(key), backend._dir(key) / "home", backend._dir(key) / "run"):
            info = path.stat()
            assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (owner.uid, owner.uid, 0o700)
        # Its subordinate range (rootless containers) is the one the console allocated.
        assert f"{owner.name}:{owner.uid_base}:{owner.uid_count}" in Path("/etc/subuid").read_text().splitlines()

    own = _inside(slurm_cluster, alice, a["job_id"], "cat", str(backend._dir("tenant-a") / "run" / "meta.json"))
    assert own.returncode == 0 and '"key": "tenant-a"' in own.stdout
    theirs = _inside(slurm_cluster, alice, a["job_id"], "cat", str(backend._dir("tenant-b") / "run" / "meta.json"))
    assert theirs.returncode != 0 and "Permission denied" in theirs.stderr
    listing = _inside(slurm_cluster, alice, a["job_id"], "ls", str(backend.root))
    assert listing.returncode != 0  # nobody lists the instances' root
