"""Helpers for the tests that run jobs on the real Slurm cluster that ``make slurm`` starts on this host
(``scripts/slurm-cluster.sh``: nodes gpu01..gpu03, 8 simulated ``gpu:h200`` each, slurmrestd on 6820).

The cluster is left running between tests and sessions; every test's jobs carry the prefix
``console-test-`` and are cancelled when the test ends, whatever happened. Jobs run as tenants'
own Unix users (``gpuc-t<N>``), which the backend creates on this host (``TENANT_USERS="create"``,
homes under ``var/slurm/tenants``); what their jobs read lives in ``scratch`` directories under
``var/slurm/test-scratch``, which they can pass through.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from django.conf import settings

SCRIPT = Path(settings.BASE_DIR) / "scripts/slurm-cluster.sh"
SLURM_CONF = Path(os.environ.get("SLURM_LOCAL_DIR", Path(settings.BASE_DIR) / "var/slurm")) / "etc/slurm.conf"
REST_URL = f"http://127.0.0.1:{os.environ.get('SLURM_LOCAL_REST_PORT', '6820')}"
PREFIX = "console-test-"
TENANT_HOMES = SLURM_CONF.parent.parent / "tenants"
JWT_KEY = SLURM_CONF.parent / "jwt.key"
# The console's Python and JupyterLab as tenants reach them (``slurm-cluster.sh env``: twins under
# var/slurm when the console's own interpreter is out of their reach), else the console's own.
TENANT_PYTHON = SLURM_CONF.parent.parent / "venvs/console/bin/python3"
TENANT_JUPYTER = SLURM_CONF.parent.parent / "venvs/jupyter/bin/jupyter"
# slurmrestd's reads (jobs, nodes) go as an unprivileged user; jobs as their tenants.
REST_USER = "nobody"
NODES = ("gpu01", "gpu02", "gpu03")
ACTIVE = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")


class Cluster:
    """The command-line view of the test cluster, for arranging and checking what the backend did."""

    def __init__(self, conf: Path) -> None:
        self.env = {**os.environ, "SLURM_CONF": str(conf)}

    def run(self, *argv: str, check: bool = True, stdin: str | None = None) -> str:
        done = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=30, input=stdin)
        if check and done.returncode != 0:
            raise AssertionError(f"{argv[0]} failed: {done.stderr or done.stdout}")
        return done.stdout

    def jobs(self) -> list[dict]:
        return json.loads(self.run("squeue", "--json"))["jobs"]

    def active(self, name: str) -> list[dict]:
        """The jobs called ``name`` that Slurm still runs or queues."""
        return [j for j in self.jobs() if j["name"] == name and j["job_state"] in ACTIVE]

    def job(self, job_id: int) -> dict | None:
        return next((j for j in self.jobs() if j["job_id"] == job_id), None)

    def allocated_gpus(self, job_id: int) -> list[str]:
        """The card indices Slurm allocated to the job on its first node, from ``gres_detail`` (IDX:3-4)."""
        detail = (self.job(job_id) or {}).get("gres_detail") or [""]
        match = re.search(r"IDX:([\d,-]+)", detail[0])
        cards: list[str] = []
        for part in (match[1] if match else "").split(","):
            if "-" in part:
                low, high = part.split("-")
                cards += [str(i) for i in range(int(low), int(high) + 1)]
            elif part:
                cards.append(part)
        return cards

    def sbatch(self, *args: str, name: str) -> int:
        """Submit a plain job (a neighbour that holds cards) named with the test prefix."""
        out = self.run("sbatch", "--parsable", f"--job-name={PREFIX}{name}", "--output=/dev/null", *args)
        return int(out.strip().split(";")[0])

    def node_state(self, node: str) -> str:
        # One line per partition the node is in (gpu and spot): the state is the node's, the same on each.
        return (self.run("sinfo", "-h", "-N", "-n", node, "-o", "%t").split() or [""])[0]

    def cancel_test_jobs(self) -> None:
        """Cancel every job of the tests and wait (boundedly) until Slurm has ended them, so the next
        test finds the cards free."""
        ids = [str(j["job_id"]) for j in self.jobs() if j["name"].startswith(PREFIX)]
        if ids:
            self.run("scancel", *ids, check=False)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(
            j["name"].startswith(PREFIX) and j["job_state"] in ACTIVE for j in self.jobs()
        ):
            time.sleep(0.2)

    def node_stop(self, node: str) -> None:
        subprocess.run([str(SCRIPT), "node-stop", node], check=True, capture_output=True, timeout=30)

    def node_kill(self, node: str) -> None:
        """The node dies: SIGKILL to its slurmd (no goodbye to the controller), as a crashed host."""
        pidfile = SLURM_CONF.parent.parent / "run" / f"slurmd-{node}.run"
        os.kill(int(pidfile.read_text().strip()), 9)

    def node_start(self, node: str) -> None:
        """Start the node's slurmd again and bring it back into service (a node Slurm marked DOWN
        while its slurmd was away returns only when asked, on a loaded machine)."""
        subprocess.run([str(SCRIPT), "node-start", node], check=True, capture_output=True, timeout=30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state = self.node_state(node)
            if state in ("idle", "mix", "alloc"):  # in service (a job may already have landed on it)
                return
            if state.startswith(("down", "drain", "fail")):
                self.run("scontrol", "update", f"nodename={node}", "state=resume", check=False)
            time.sleep(1)


def cluster_or_skip() -> Cluster:
    if not SCRIPT.exists() or not SLURM_CONF.exists():
        pytest.skip(f"no local Slurm cluster ({SLURM_CONF} is missing): start it with `make slurm`")
    done = subprocess.run([str(SCRIPT), "status"], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        stopped = [line for line in done.stdout.splitlines() if line.endswith("stopped")]
        pytest.skip(f"the local Slurm cluster is not running ({'; '.join(stopped)}): start it with `make slurm`")
    return Cluster(SLURM_CONF)


def tenant(n: int):
    """Tenant ``n`` as the console allocates it (``instances.tenancy``), for tests that call the backend."""
    from instances.models import TenantRange
    from instances.tenancy import tenant_from_range

    return tenant_from_range(TenantRange(pk=n))


def scratch(request) -> Path:
    """A temporary directory the tenants' jobs can pass through (a test's ``tmp_path`` is not: pytest
    keeps its base 0700, and resets it whenever another session starts), removed after the test."""
    base = SLURM_CONF.parent.parent / "test-scratch"
    base.mkdir(exist_ok=True)
    base.chmod(0o711)
    path = Path(tempfile.mkdtemp(prefix=f"{request.node.name[:40]}-", dir=base))
    path.chmod(0o711)
    request.addfinalizer(lambda: shutil.rmtree(path, ignore_errors=True))
    return path


def slurm_backends(root: Path, *, rest: bool = False, services=("lab",), **options) -> dict:
    """A PROVISIONING_BACKENDS value: the small simulated fleet ("default") and the test cluster
    ("slurm", region "slurm-local"), through slurmrestd with JWT when ``rest``, else the CLI."""
    from instances.tests.conftest import backends

    slurm = {
        "REGION": "slurm-local",
        "REGION_NAME": "Slurm (this host)",
        "ROOT": str(root),
        "SLURM_CONF": str(SLURM_CONF),
        "JOB_PREFIX": PREFIX,
        "SERVICES": list(services),
        "GPU_TYPES": {"h200": "h200"},
        "PORTS_DIR": "/tmp/console-test-slurm-ports",  # noqa: S108 (node-local, one file per tenant)
        "TENANT_USERS": "create",
        "TENANT_HOME_ROOT": str(TENANT_HOMES),
        # The servers as the tenants' processes: what most of these tests exercise. The container
        # engine's tests (test_slurm_containers) ask for ENGINE="podman".
        "ENGINE": "process",
        # This host's nodes are small: the catalogue's CPU and RAM per card are capped.
        "MAX_CPUS": 2,
        "MAX_MEMORY_GB": 2,
    }
    if TENANT_PYTHON.exists():
        slurm["PYTHON"] = str(TENANT_PYTHON)
    if TENANT_JUPYTER.exists():
        slurm["JUPYTER_BIN"] = str(TENANT_JUPYTER)
    if rest:
        slurm |= {"REST_URL": REST_URL, "REST_USER": REST_USER, "JWT_KEY_FILE": str(JWT_KEY), "JWT_LIFESPAN_S": 600}
    return {**backends(), "slurm": {"BACKEND": "providers.slurm.backend.SlurmBackend", "OPTIONS": slurm | options}}
