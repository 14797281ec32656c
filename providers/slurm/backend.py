"""A Slurm cluster as a provider: an instance (or a multi-node cluster) is a Slurm job holding GPUs.

Like JupyterHub's batchspawner: the console submits a batch job asking for ``gpu:TYPE:N`` through
GRES (``--nodes`` for a cluster); Slurm places it, queues it while the cluster is full, and runs
``python -m providers.slurm.job`` on every node it got. That program starts the instance's user
servers (JupyterLab, code-server, sshd, the app) with the local backend's runtime on the first node,
with ``CUDA_VISIBLE_DEVICES`` as Slurm set it for the allocation, and writes a report into the
instance's directory. The job runs as the tenant's own Unix user, so the report is the tenant's
claim: the console checks it against the job's allocation and the instance's declared ports and
signs what passes for its proxy and gateway (the threat model: ``providers.slurm.job``).

- The instance's directory (``ROOT/<key>``: ``home`` is its disk, ``run`` its secrets and reports)
  is on a filesystem the console and every node share. Stop cancels the job and keeps the
  directory; start submits a new job on the same directory; release cancels and deletes it.
- While the job waits, ``poll`` says PENDING with Slurm's queue position and reason ("Queued:
  position 2, reason Resources"); once it runs, the node(s) and cards are in the instance's state.
- Two ways to talk to Slurm, the same operations: slurmrestd with JWT (``REST_URL``), or the
  command-line tools (``sbatch``, ``squeue --json``, ``scancel``, ``sinfo --json``) otherwise.
- Node inventory and health come from Slurm: a node that is DOWN, DRAINED, FAILED or not
  responding is unhealthy; a job that Slurm killed with its node (NODE_FAIL) makes the instance GONE,
  and since its disk is on the shared filesystem (``disk_follows_node_loss``) the console starts it
  again on a healthy node.
- Tiers: on-demand instances are ``--no-requeue`` jobs in ``PARTITION``; interruptible ones are
  ``--requeue`` jobs in ``SPOT_PARTITION``, which Slurm preempts for on-demand work. ``poll`` says
  PREEMPTED from the grace period on (the job's ``preempt_time``) and while the requeued job waits
  (its ``restart_cnt`` above the run the console saw), then RUNNING once the new run reports.

    PROVISIONING_BACKENDS["slurm"] = {
        "BACKEND": "providers.slurm.backend.SlurmBackend",
        "OPTIONS": {
            "REGION": "slurm-local",            # the region its nodes are in (catalogue_seed creates it)
            "REGION_NAME": "Slurm cluster",
            "ROOT": "/shared/console/instances", # the instances' directories, on the shared filesystem
            "GPU_TYPES": {"h200": "h200"},       # Slurm GRES type -> console GPU model slug (default: same)
            "PARTITION": "gpu",                  # default: the cluster's default partition
            # Interruptible ("spot") instances: requeueable jobs in a partition of a lower PriorityTier
            # over the same nodes (PreemptType=preempt/partition_prio, PreemptMode=REQUEUE, GraceTime).
            "SPOT_PARTITION": "spot",
            "SBATCH_ARGS": ["--account=ml", "--qos=normal"],  # anything else the site requires
            # Jobs run as each tenant's own Unix user (``providers.slurm.tenants``), never root: the
            # site provisions gpuc-t<N> with the console's uid ("site": LDAP/SSSD), or the console
            # creates them on this host ("create": useradd, subuid/subgid, homes under TENANT_HOME_ROOT).
            "TENANT_USERS": "site",
            "TENANT_HOME_ROOT": "/shared/console/tenants",
            # The REST path (slurmrestd with JWT); leave REST_URL empty to use the command-line tools
            # (which submit with ``sbatch --uid``: the console runs as root there).
            "REST_URL": "http://slurm-head:6820",
            "REST_USER": "console",              # reads (jobs, nodes) as this user; root is refused
            # Each tenant's job is submitted with a token for that tenant: minted with the cluster's
            # JWT key, or by a command with {user} in it (run as root or SlurmUser).
            "JWT_KEY_FILE": "/etc/console/slurm-jwt.key",
            "JWT_COMMAND": ["scontrol", "token", "username={user}", "lifespan=3600"],
            "JWT_TOKEN": "",                     # a fixed token: REST_USER's reads only
            # The command-line path: where the tools are and which slurm.conf they read.
            "SLURM_CONF": "/etc/slurm/slurm.conf",
            "BIN_DIR": "",                       # default: found on PATH
            # What the job runs on the node: the console's code and Python, on the shared filesystem.
            "PYTHON": "/shared/console/.venv/bin/python",
            "CONSOLE_DIR": "/shared/console",
            "SERVICES": ["lab", "code", "ssh"],
            "BIND": "127.0.0.1",                 # where the servers listen (a node address on a real cluster)
            # A real fabric, for multi-node jobs only. With the topology plugin configured
            # (TopologyPlugin=topology/tree), ask for at most this many leaf switches (``--switches``),
            # waiting up to SWITCHES_WAIT for them (Slurm's time format; empty: Slurm's own limit).
            "TOPOLOGY_SWITCHES": 1,
            "SWITCHES_WAIT": "10:00",
            # NCCL's environment on every rank (the fabric's interfaces and HCAs), exported by the job.
            "NCCL_ENV": {"NCCL_SOCKET_IFNAME": "ib0", "NCCL_IB_HCA": "mlx5_0,mlx5_1"},
            "CLUSTER_SBATCH_ARGS": ["--network=..."],  # anything else a cluster's job needs there
        },
    }

Resizing a running cluster (``ClusterResizeCapability``) is not offered: Slurm can only shrink a
running job (``scontrol update NumNodes``), never grow one, and the ranks' world size is fixed when
``srun`` starts; the console refuses it (``resize_not_supported``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import json
import logging
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import httpx
from django.conf import settings

from core.user_content import ProxyTarget
from providers.base import (
    ClustersCapability,
    EntryPoints,
    EntryPointsCapability,
    GpuMetricsCapability,
    GpuProcess,
    GpuSample,
    InstanceSpec,
    MachineInfo,
    NodeInfo,
    Observation,
    Observed,
    PermanentBackendError,
    ProvisioningBackend,
    SshTarget,
    Tenant,
    TransientBackendError,
)
from providers.local.runtime.servers import CODE_SERVER_COOKIE
from providers.slurm.job import claim_read, report_read, report_write
from providers.slurm.tenants import TenantAccounts, check_tenant, jwt_mint, refuse_root_user

STATE_VERSION = 1
DEFAULT_SERVICES = ("lab", "code", "ssh")
# A node's GPU samples older than this (the job samples every 15 s) are not the machine's present.
GPU_SAMPLE_MAX_AGE_S = 60
_SAMPLE_FIELDS = ("utilization_pct", "memory_used_mib", "memory_total_mib", "power_w", "temperature_c")


def _processes(listed) -> tuple[GpuProcess, ...]:
    """A report's ``[[pid, name, memory], …]`` as processes; anything malformed is left out."""
    found = []
    for item in listed if isinstance(listed, list) else ():
        if isinstance(item, list) and len(item) == 3 and isinstance(item[0], int):
            found.append(GpuProcess(item[0], str(item[1] or "")[:200], _int(item[2])))
    return tuple(found)


ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING"}
# Jobs Slurm ended because their node died: the machine is lost, not stopped.
NODE_LOST = {"NODE_FAIL", "BOOT_FAIL"}
UNHEALTHY = {"DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "NOT_RESPONDING", "ERROR", "INVAL", "UNKNOWN"}


def _int(value) -> int | None:
    return None if value is None else int(value)


# Reports the console refused (forged, or pointing outside the job's allocation): a security event.
security_log = logging.getLogger("console.security.slurm")


def _refused(key: str, job_id: str, why: str) -> None:
    security_log.warning("Refused a Slurm job report of instance %s (job %s): %s", key, job_id, why)


def _host_allowed(host: str, allowed: set[str]) -> bool:
    """``host`` is one of ``allowed``, or a fully qualified name of one (gpu01.cluster for gpu01)."""
    return bool(host) and any(host == name or host.startswith(f"{name}.") for name in allowed if name)


def hostlist_expand(nodes: str) -> list[str]:
    """Slurm's host list (``gpu[01-02,05],cpu1``) as node names."""
    names: list[str] = []
    for stem, inner, plain in re.findall(r"([^,\[]+)\[([^\]]*)\]|([^,\[\]]+)", nodes):
        if plain:
            names.append(plain)
            continue
        for part in inner.split(","):
            low, _, high = part.partition("-")
            if not low.isdigit() or (high and not high.isdigit()):
                continue
            names += [f"{stem}{i:0{len(low)}d}" for i in range(int(low), int(high or low) + 1)]
    return names


_GRES = re.compile(r"^gpu(?::(?P<type>[^:(]+))?:(?P<count>\d+)")


# --- Talking to Slurm: two transports, one shape ------------------------------------------------------


class SlurmCli:
    """The command-line tools: ``sbatch`` (script on stdin), ``squeue --json``, ``scancel``, ``sinfo --json``.

    Slurm 22.05's ``squeue --json`` ignores filters and lists every job it knows (recently ended ones
    too, for ``MinJobAge``), which is what ``poll`` wants anyway: one call sees the whole queue.
    """

    def __init__(self, *, bin_dir: str = "", slurm_conf: str = "", timeout: float = 15.0) -> None:
        self.bin_dir = bin_dir
        self.env = {**os.environ, **({"SLURM_CONF": slurm_conf} if slurm_conf else {})}
        self.timeout = timeout

    def _run(self, tool: str, *args: str, stdin: str | None = None) -> str:
        path = os.path.join(self.bin_dir, tool) if self.bin_dir else (shutil.which(tool) or tool)
        try:
            done = subprocess.run(  # noqa: S603 (fixed tools, arguments from the backend)
                [path, *args],
                input=stdin,
                capture_output=True,
                text=True,
                env=self.env,
                timeout=self.timeout,
                check=False,
            )
        except FileNotFoundError as exc:
            raise PermanentBackendError(f"Slurm's {tool} is not installed on the console's host.") from exc
        except subprocess.TimeoutExpired as exc:
            raise TransientBackendError(f"Slurm's {tool} did not answer within {self.timeout:.0f} s.") from exc
        if done.returncode != 0:
            message = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
            text = f"{tool}: {message[0][:300]}"
            # The controller unreachable (or busy) is worth retrying; a refused request is not.
            if re.search(r"Unable to contact|Socket timed out|Connection refused|Zero Bytes|try again", text, re.I):
                raise TransientBackendError(text)
            raise PermanentBackendError(text)
        return done.stdout

    def submit(self, *, script: str, job: dict) -> int:
        args = ["--parsable", f"--job-name={job['name']}", f"--nodes={job['nodes']}", "--ntasks-per-node=1"]
        args += [f"--gres={job['gres']}", f"--cpus-per-task={job['cpus_per_task']}", f"--chdir={job['cwd']}"]
        if job.get("memory_mb"):
            args.append(f"--mem={job['memory_mb']}M")
        args += [f"--output={job['output']}", "--export=NONE"]
        if job.get("uid"):
            # As the tenant: only root may name another user's uid (``sbatch --uid``).
            args += [f"--uid={job['uid']}", f"--gid={job['uid']}"]
        # A requeued run appends to the log instead of truncating the previous run's.
        args += ["--requeue", "--open-mode=append"] if job.get("requeue") else ["--no-requeue"]
        if job.get("partition"):
            args.append(f"--partition={job['partition']}")
        if job.get("comment"):
            args.append(f"--comment={job['comment']}")
        args += list(job.get("extra", ()))
        try:
            out = self._run("sbatch", *args, stdin=script).strip()
        except PermanentBackendError as exc:
            if job.get("uid") and re.search(r"uid|root", str(exc), re.I):
                raise PermanentBackendError(
                    f"{exc}. The command-line path submits each job as its tenant (sbatch --uid), which needs the "
                    "console to run as root; otherwise use slurmrestd (REST_URL with JWT_KEY_FILE)."
                ) from exc
            raise
        try:
            return int(out.split(";")[0])
        except ValueError as exc:
            raise TransientBackendError(f"sbatch answered {out[:200]!r}") from exc

    def jobs(self) -> list[dict]:
        return _json(self._run("squeue", "--json"), "squeue").get("jobs", [])

    def cancel(self, job_id: int, *, user: str = "") -> None:
        self._run("scancel", str(job_id))

    def nodes(self) -> list[dict]:
        return _json(self._run("sinfo", "--json"), "sinfo").get("nodes", [])


class SlurmRest:
    """slurmrestd (OpenAPI ``v0.0.38`` in Slurm 22.05) with JWT: ``X-SLURM-USER-NAME`` and ``-TOKEN``.

    Reads (jobs, nodes) go as ``user`` (``REST_USER``: an unprivileged account, never root). A job is
    submitted, and cancelled, as its tenant: v0.0.38 runs a job as the user the token names and has
    no field to name another, so the console needs a token per tenant. It mints them with the
    cluster's JWT key (``JWT_KEY_FILE``, ``providers.slurm.tenants.jwt_mint``), or runs ``JWT_COMMAND``
    with ``{user}`` in it replaced (``scontrol token username={user}``, as root or SlurmUser); a
    fixed ``JWT_TOKEN`` serves ``REST_USER`` only. A token is minted again when it nears its end or
    slurmrestd refuses it.
    """

    def __init__(
        self,
        *,
        url: str,
        user: str,
        token: str = "",
        token_command: list[str] | None = None,
        token_lifespan: int = 3600,
        jwt_key_file: str = "",
        api: str = "v0.0.38",
        slurm_conf: str = "",
        timeout: float = 15.0,
    ) -> None:
        self.base = f"{url.rstrip('/')}/slurm/{api}"
        self.user = user
        self.fixed_token = token
        self.token_command = list(token_command or [])
        self.token_lifespan = token_lifespan
        self.jwt_key_file = jwt_key_file
        self.env = {**os.environ, **({"SLURM_CONF": slurm_conf} if slurm_conf else {})}
        self.timeout = timeout
        self._tokens: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def token(self, user: str = "", *, fresh: bool = False) -> str:
        user = user or self.user
        if self.fixed_token and user == self.user:
            return self.fixed_token
        with self._lock:
            token, until = self._tokens.get(user, ("", 0.0))
            if fresh or not token or time.time() > until:
                token, lifespan = self._mint(user)
                until = time.time() + max(30, lifespan - 60)
                self._tokens[user] = (token, until)
            return token

    def _mint(self, user: str) -> tuple[str, int]:
        if self.jwt_key_file:
            try:
                key = Path(self.jwt_key_file).read_bytes()
            except OSError as exc:
                raise PermanentBackendError(f"The Slurm backend cannot read JWT_KEY_FILE: {exc.strerror}.") from exc
            return jwt_mint(key=key, user=user, lifespan=self.token_lifespan), self.token_lifespan
        if not self.token_command:
            raise PermanentBackendError("The Slurm backend has REST_URL but neither JWT_KEY_FILE nor JWT_COMMAND.")
        templated = any("{user}" in part for part in self.token_command)
        if user != self.user and not templated:
            raise PermanentBackendError(
                "Jobs run as each tenant's own user: give the Slurm backend JWT_KEY_FILE, or a JWT_COMMAND "
                "with {user} in it (scontrol token username={user})."
            )
        command = [part.replace("{user}", user) for part in self.token_command]
        try:
            out = subprocess.run(  # noqa: S603 (the operator's configured command)
                command, capture_output=True, text=True, env=self.env, timeout=self.timeout, check=True
            ).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            raise TransientBackendError(f"Could not get a Slurm token: {exc}") from exc
        lifespan = self.token_lifespan
        match = re.search(r"lifespan=(\d+)", " ".join(command))
        if match:
            lifespan = int(match[1])
        return out.strip().split("=", 1)[-1], lifespan

    def _request(self, method: str, path: str, body: dict | None = None, *, user: str = "") -> dict:
        user = user or self.user
        for attempt in range(2):
            headers = {"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": self.token(user, fresh=attempt > 0)}
            try:
                response = httpx.request(method, f"{self.base}{path}", json=body, headers=headers, timeout=self.timeout)
            except httpx.HTTPError as exc:
                raise TransientBackendError(f"slurmrestd did not answer: {exc}") from exc
            if response.status_code in (401, 403) and attempt == 0 and not self.fixed_token:
                continue  # an expired token: mint another once
            break
        try:
            data = response.json()
        except ValueError:
            data = {}
        errors = [e for e in data.get("errors", []) if e.get("error_number") or e.get("error")]
        if response.status_code >= 500 or response.status_code == 429:
            raise TransientBackendError(f"slurmrestd answered {response.status_code}")
        if response.status_code >= 400 or errors:
            detail = errors[0].get("error") if errors else response.text[:200]
            raise PermanentBackendError(f"slurmrestd refused {method} {path}: {detail}")
        return data

    def submit(self, *, script: str, job: dict) -> int:
        desc = {
            "name": job["name"],
            "nodes": job["nodes"],
            "tasks": job["nodes"],
            "tasks_per_node": 1,
            "cpus_per_task": job["cpus_per_task"],
            "gres": job["gres"],
            **({"memory_per_node": job["memory_mb"]} if job.get("memory_mb") else {}),
            "current_working_directory": job["cwd"],
            "standard_output": job["output"],
            "requeue": bool(job.get("requeue")),
            # The job's environment is the script's own (as ``--export=NONE`` on the CLI).
            "environment": {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
        }
        if job.get("requeue"):
            desc["open_mode"] = "append"
        if job.get("partition"):
            desc["partition"] = job["partition"]
        if job.get("comment"):
            desc["comment"] = job["comment"]
        desc.update(job.get("rest_extra") or {})
        data = self._request("POST", "/job/submit", {"script": script, "job": desc}, user=job.get("user") or "")
        try:
            return int(data["job_id"])
        except (KeyError, TypeError, ValueError) as exc:
            raise TransientBackendError("slurmrestd gave no job id") from exc

    def jobs(self) -> list[dict]:
        return self._request("GET", "/jobs").get("jobs", [])

    def cancel(self, job_id: int, *, user: str = "") -> None:
        """Cancel as the job's own user (``REST_USER`` is no operator: it may cancel no one else's)."""
        try:
            self._request("DELETE", f"/job/{job_id}", user=user)
        except PermanentBackendError as exc:
            if "already completing or completed" in str(exc).lower() or "invalid job id" in str(exc).lower():
                return  # already gone counts as done
            raise

    def nodes(self) -> list[dict]:
        return self._request("GET", "/nodes").get("nodes", [])


def _json(text: str, tool: str) -> dict:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise TransientBackendError(f"{tool} --json gave unreadable output") from exc


# --- Reading Slurm's answers ------------------------------------------------------------------------------


def gres_gpus(gres: str) -> tuple[str, int]:
    """``("h200", 8)`` from a node's ``gpu:h200:8(S:0-1),shard:…``; ``("", 0)`` when it has no GPUs."""
    for part in re.split(r",(?![^(]*\))", gres or ""):
        match = _GRES.match(part.strip())
        if match:
            return match["type"] or "", int(match["count"])
    return "", 0


def node_states(node: dict) -> set[str]:
    """Every state word of a node: the base state (``idle``, ``down``…) and its flags (``DRAIN``…)."""
    words = {str(node.get("state", "")).upper()}
    words |= {str(flag).upper() for flag in node.get("state_flags") or ()}
    return {w for word in words for w in re.split(r"[+ ]", word) if w}


def job_state(job: dict) -> str:
    state = job.get("job_state") or ""
    if isinstance(state, list):  # later OpenAPI versions give a list of words
        state = state[0] if state else ""
    return str(state).upper()


def job_key(job: dict, prefix: str) -> str | None:
    name = str(job.get("name") or "")
    return name[len(prefix) :] if name.startswith(prefix) else None


def queue_position(job: dict, jobs: list[dict]) -> int:
    """1 + the pending jobs of the same partition that Slurm will consider first (higher priority, or
    the same priority and submitted earlier): the job's place in the line."""
    partition = job.get("partition")

    def order(j: dict) -> tuple:
        return (-int(j.get("priority") or 0), int(j.get("submit_time") or 0), int(j.get("job_id") or 0))

    mine = order(job)
    ahead = [
        j
        for j in jobs
        if job_state(j) == "PENDING" and j.get("partition") == partition and j.get("job_id") != job.get("job_id")
    ]
    return 1 + sum(1 for j in ahead if order(j) < mine)


# --- The backend -------------------------------------------------------------------------------------------


class SlurmBackend(ClustersCapability, EntryPointsCapability, GpuMetricsCapability, ProvisioningBackend):
    # The instance's directory (its disk) is on the filesystem every node shares: a job lost with its
    # node is submitted again elsewhere on the same directory.
    disk_follows_node_loss = True
    # Interruptible jobs are ``--requeue``: Slurm queues a preempted one again and runs it itself.
    requeues_preempted = True

    def __init__(self, *, alias: str, options: dict | None = None) -> None:
        super().__init__(alias=alias, options=options)
        o = self.options
        # A job spans ``--nodes`` hosts; Slurm itself refuses one larger than its partition.
        self.max_nodes = int(o.get("MAX_NODES", 128))
        self.region = o.get("REGION", "slurm")
        self.root = Path(o.get("ROOT") or settings.BASE_DIR / "var/slurm-instances")
        self.prefix = o.get("JOB_PREFIX", "console-")
        self.gpu_types: dict[str, str] = dict(o.get("GPU_TYPES") or {})
        self.services = tuple(o.get("SERVICES", DEFAULT_SERVICES))  # () is allowed: a job that only holds cards
        self.secret = str(o.get("SECRET") or settings.SECRET_KEY)
        timeout = float(o.get("TIMEOUT_S", 15))
        # Each tenant's jobs run as its own Unix user (``providers.slurm.tenants``): made by the console
        # ("create", on a cluster whose nodes read this host's users) or by the site ("site": LDAP/SSSD).
        self.tenants = TenantAccounts(
            mode=str(o.get("TENANT_USERS") or "site"),
            home_root=Path(o.get("TENANT_HOME_ROOT") or self.root / ".tenants"),
        )
        if o.get("REST_URL"):
            refuse_root_user(str(o.get("REST_USER") or ""), option="REST_USER")
            self.api: SlurmCli | SlurmRest = SlurmRest(
                url=o["REST_URL"],
                user=str(o["REST_USER"]),
                token=o.get("JWT_TOKEN", ""),
                token_command=o.get("JWT_COMMAND"),
                token_lifespan=int(o.get("JWT_LIFESPAN_S", 3600)),
                jwt_key_file=str(o.get("JWT_KEY_FILE") or ""),
                api=o.get("REST_API", "v0.0.38"),
                slurm_conf=o.get("SLURM_CONF", ""),
                timeout=timeout,
            )
        else:
            self.api = SlurmCli(bin_dir=o.get("BIN_DIR", ""), slurm_conf=o.get("SLURM_CONF", ""), timeout=timeout)

    # --- secrets: derived from the console's key, so nothing needs storing -------------------------

    def _derive(self, key: str, purpose: str) -> str:
        return hmac.new(self.secret.encode(), f"slurm:{purpose}:{key}".encode(), hashlib.sha256).hexdigest()

    def report_secret(self, key: str) -> str:
        """The key that signs the console's own verified copy of the instance's report (``_verified_write``).
        Derived from the console's secret and never written where a job can read it."""
        return self._derive(key, "report")

    def server_secrets(self, key: str) -> dict[str, str]:
        return {service: self._derive(key, service) for service in ("lab", "code", "app")}

    # --- the instance's directory ---------------------------------------------------------------------

    def _dir(self, key: str) -> Path:
        if not key or "/" in key or key.startswith(".") or len(key) > 64:
            raise PermanentBackendError(f"invalid instance key {key!r}")
        return self.root / key

    def _prepare(self, key: str, spec: InstanceSpec | None, tenant: Tenant) -> None:
        """Write what the job needs into the instance's directory: its metadata (the servers' secrets,
        SSH keys, app, volumes) in the local runtime's format.

        The directory is the tenant's: owned by its user, mode 0700, so another tenant's job can
        neither list nor read it (``ROOT`` itself is 0711: every tenant passes through, none lists it)."""
        base = self._dir(key)
        run = base / "run"
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o711)  # noqa: S103 (tenants pass through to their own directory; none lists it)
        (base / "home").mkdir(parents=True, exist_ok=True)
        run.mkdir(parents=True, exist_ok=True)
        for path in (base, base / "home", run):
            self.tenants.hand_over(path, tenant)
        meta_path = run / "meta.json"
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            meta = {"key": key, "created": time.time()}
        meta["secrets"] = self.server_secrets(key)
        if spec is not None:
            app = spec.app
            meta.update(
                owner_ref=spec.owner_ref or meta.get("owner_ref", ""),
                ssh_public_keys=list(spec.ssh_public_keys),
                # In the local runtime's format: the job's runtime mounts them as the local backend does.
                mounts=[
                    {"source": v.state.get("path", ""), "path": v.path, "read_only": v.read_only}
                    for v in spec.volumes
                    if v.state.get("path")
                ],
                # The runtime on the node runs it (and its WebUI) as it does on the local backend.
                app=dataclasses.asdict(app) if app is not None else None,
                # What the job runs on SIGTERM when Slurm preempts it (``providers.slurm.job``).
                interruptible=spec.interruptible,
                checkpoint_command=spec.checkpoint_command,
            )
        tmp = meta_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(meta, indent=1))
        self.tenants.hand_over(tmp, tenant, mode=0o600)
        os.replace(tmp, meta_path)
        # No key in the tenant's reach: the job's reports are claims the console checks (``_verify``).
        (run / "report.key").unlink(missing_ok=True)  # what an older console left there
        self._verified_clear(key)
        for old in run.glob("slurm-report-*.json"):
            # A previous job's reports: the new job writes its own. Its claim on the disk stays: a run
            # left on a dead node stops when the new job claims the disk (``providers.slurm.job``).
            old.unlink(missing_ok=True)

    def _nccl_env(self) -> dict[str, str]:
        """``NCCL_ENV``, checked: names as a shell variable's, values as strings (quoted when exported)."""
        env = {str(k): str(v) for k, v in (self.options.get("NCCL_ENV") or {}).items()}
        bad = [name for name in env if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)]
        if bad:
            raise PermanentBackendError(f"NCCL_ENV names must be environment variable names, not {', '.join(bad)}.")
        return env

    def _script(self, key: str, *, tenant: Tenant, nodes: int = 1) -> str:
        o = self.options
        python = o.get("PYTHON") or sys.executable
        console_dir = str(o.get("CONSOLE_DIR") or settings.BASE_DIR)
        args = [
            python,
            "-m",
            "providers.slurm.job",
            f"--root={self.root}",
            f"--key={key}",
            f"--services={','.join(self.services)}",
            f"--url-prefix={getattr(settings, 'CONSOLE_PROXY_PREFIX', '/i/')}",
            f"--bind={o.get('BIND', '127.0.0.1')}",
            f"--port-low={o.get('PORT_LOW', 20000)}",
            f"--port-high={o.get('PORT_HIGH', 29999)}",
            f"--ports-dir={o.get('PORTS_DIR', '/tmp/console-slurm-ports')}",  # noqa: S108 (node-local on purpose)
        ]
        if o.get("JUPYTER_BIN"):
            args.append(f"--jupyter-bin={o['JUPYTER_BIN']}")
        if o.get("CODE_SERVER_ENTRY"):
            args.append(f"--code-server-entry={o['CODE_SERVER_ENTRY']}")
        if o.get("NVIDIA_SMI"):
            args.append(f"--nvidia-smi={o['NVIDIA_SMI']}")
        # The public models and datasets, on the shared filesystem, read-only in every instance.
        args += [f"--public-mount={path}={source}" for path, source in sorted((o.get("PUBLIC_MOUNTS") or {}).items())]
        srun = os.path.join(o["BIN_DIR"], "srun") if o.get("BIN_DIR") else "srun"
        # A cluster's ranks talk over the fabric: NCCL's settings reach every rank through srun's export.
        fabric = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in self._nccl_env().items())
        return (
            "#!/bin/bash\n"
            f"# The console's instance {key}: its servers on the first node, every node reporting.\n"
            "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
            # A node that does not know the tenant's user (site-provisioned users) says so, and a job
            # never goes on as anyone else.
            f'if [ "$(id -u)" != {tenant.uid} ] || [ "$(id -u)" = 0 ]; then\n'
            f'  echo "console: this job must run as {tenant.name} (uid {tenant.uid}), not $(id -un) (uid $(id -u))" >&2\n'
            "  exit 1\nfi\n"
            "export SLURM_EXPORT_ENV=ALL\n"
            f"{fabric if nodes > 1 else ''}"
            f"cd {shlex.quote(console_dir)}\n"
            f"export PYTHONPATH={shlex.quote(console_dir)}\n"
            f"exec {shlex.quote(srun)} --ntasks-per-node=1 --kill-on-bad-exit=1 {shlex.join(args)}\n"
        )

    def _submit(self, key: str, spec: InstanceSpec, *, nodes: int) -> dict:
        tenant = check_tenant(spec.tenant)
        self.tenants.ensure(tenant)
        self._prepare(key, spec, tenant)
        gpu_type = self._gres_type(spec.gpu_model)
        cpus, memory_mb = self._limits(spec)
        job = {
            "name": f"{self.prefix}{key}",
            "nodes": nodes,
            "gres": f"gpu:{gpu_type}:{spec.gpu_count}" if gpu_type else f"gpu:{spec.gpu_count}",
            "cpus_per_task": cpus,
            "memory_mb": memory_mb,
            "cwd": str(self._dir(key) / "home"),
            "output": str(self._dir(key) / "run" / "slurm-%j.log"),
            "partition": self.options.get("SPOT_PARTITION", "spot")
            if spec.interruptible
            else self.options.get("PARTITION", ""),
            "requeue": spec.interruptible,
            "comment": spec.owner_ref,
            "extra": list(self.options.get("SBATCH_ARGS") or ()),
            "rest_extra": dict(self.options.get("REST_JOB") or {}),
            # Whose job it is: sbatch --uid on the command line, the tenant's own token over REST.
            "uid": tenant.uid,
            "user": tenant.name,
        }
        if nodes > 1:
            job["extra"] += list(self.options.get("CLUSTER_SBATCH_ARGS") or ())
            switches = int(self.options.get("TOPOLOGY_SWITCHES") or 0)
            if switches > 0:
                # With topology/tree: the job's nodes under at most ``switches`` leaf switches.
                wait = str(self.options.get("SWITCHES_WAIT") or "")
                job["extra"].append(f"--switches={switches}@{wait}" if wait else f"--switches={switches}")
                job["rest_extra"]["required_switches"] = switches
        if (self.options.get("PIN_NODE") or spec.pin) and spec.node:
            # Where the console placed it; always for work that took preempted machines' cards, so
            # that Slurm does not preempt a second machine elsewhere while the first winds down.
            names = [spec.node, *spec.peer_nodes] if spec.pin else [spec.node]
            job["extra"].append(f"--nodelist={','.join(names)}")
            job["rest_extra"]["required_nodes"] = names
        job_id = self.api.submit(script=self._script(key, tenant=tenant, nodes=nodes), job=job)
        return {
            "v": STATE_VERSION,
            "tenant": dataclasses.asdict(tenant),
            "job_id": job_id,
            "nodes": nodes,
            "gpu_count": spec.gpu_count,
            "gres_type": gpu_type,
            "cpus": spec.cpus,
            "memory_gb": spec.memory_gb,
            # What the job may claim to serve: the proxy and the gateway go nowhere else (``_verify``).
            "declared": self._declared(spec),
            "dir": str(self._dir(key)),
            "stopped": False,
            "interruptible": spec.interruptible,
            "restarts": 0,
        }

    def _limits(self, spec: InstanceSpec) -> tuple[int, int]:
        """Each node's cores and memory (MiB; 0: Slurm's default): the catalogue's CPU and RAM for the
        machine's cards, capped by ``MAX_CPUS`` and ``MAX_MEMORY_GB`` (a small cluster's nodes). Slurm's
        task/cgroup enforces them (a cpuset; a memory limit whose excess the kernel kills)."""
        o = self.options
        cpus = math.ceil(spec.cpus) if spec.cpus else int(o.get("CPUS_PER_GPU", 1)) * spec.gpu_count
        if int(o.get("MAX_CPUS") or 0) > 0:
            cpus = min(cpus, int(o["MAX_CPUS"]))
        memory_gb = float(spec.memory_gb or 0)
        if memory_gb and float(o.get("MAX_MEMORY_GB") or 0) > 0:
            memory_gb = min(memory_gb, float(o["MAX_MEMORY_GB"]))
        return max(1, cpus), int(memory_gb * 1024)

    def _gres_type(self, gpu_model: str) -> str:
        for slurm_type, slug in self.gpu_types.items():
            if slug == gpu_model:
                return slurm_type
        return gpu_model

    def _active_job(self, key: str, jobs: list[dict]) -> dict | None:
        mine = [j for j in jobs if job_key(j, self.prefix) == key and job_state(j) in ACTIVE]
        return max(mine, key=lambda j: int(j.get("job_id") or 0)) if mine else None

    # --- the machine ------------------------------------------------------------------------------------

    def create(self, *, key: str, spec: InstanceSpec) -> dict:
        """Submit the instance's job, or find the one a previous attempt submitted (by its name)."""
        existing = self._active_job(key, self.api.jobs())
        if existing is not None:
            return {
                "v": STATE_VERSION,
                "tenant": dataclasses.asdict(spec.tenant) if spec.tenant else None,
                "job_id": int(existing["job_id"]),
                "nodes": spec.nodes,
                "gpu_count": spec.gpu_count,
                "gres_type": self._gres_type(spec.gpu_model),
                "dir": str(self._dir(key)),
                "stopped": False,
                "interruptible": spec.interruptible,
                "restarts": int(existing.get("restart_cnt") or 0),
            }
        return self._submit(key, spec, nodes=spec.nodes)

    def start(self, *, key: str, state: dict, node: str, spec: InstanceSpec | None = None) -> dict:
        """Submit a new job on the instance's directory; with a live job, ask it to restart crashed servers."""
        if not self._dir(key).is_dir():
            raise PermanentBackendError("This machine's disk no longer exists on the cluster.")
        existing = self._active_job(key, self.api.jobs())
        if existing is not None and job_state(existing) != "COMPLETING":
            job_id = int(existing["job_id"])
            if job_id == state.get("job_id") and not state.get("stopped"):
                restarts = int(existing.get("restart_cnt") or 0)
                if restarts > int(state.get("restarts") or 0):
                    # Slurm requeued it after its node failed: that new run is the restart.
                    return {**state, "restarts": restarts}
                self._repair_request(key)  # it runs: the job restarts its crashed servers in place
                return state
            return {**state, "job_id": job_id, "stopped": False}  # a job a previous attempt submitted
        if spec is None:
            spec = self._spec_from_state(key, state, node)
        return self._submit(key, spec, nodes=int(state.get("nodes") or spec.nodes))

    def _spec_from_state(self, key: str, state: dict, node: str) -> InstanceSpec:
        return InstanceSpec(
            node=node,
            gpu_model=self.gpu_types.get(state.get("gres_type", ""), state.get("gres_type", "")),
            gpu_count=int(state.get("gpu_count") or 1),
            image="",
            disk_gb=0,
            nodes=int(state.get("nodes") or 1),
            interruptible=bool(state.get("interruptible")),
            tenant=Tenant(**state["tenant"]) if state.get("tenant") else None,
            cpus=float(state.get("cpus") or 0),
            memory_gb=int(state.get("memory_gb") or 0),
        )

    def _repair_request(self, key: str) -> None:
        path = self._dir(key) / "run" / "slurm-repair"
        try:
            count = int(path.read_text().strip() or 0)
        except (OSError, ValueError):
            count = 0
        path.write_text(str(count + 1))

    def checkpoint(self, *, key: str, state: dict, command: str, grace_s: int) -> bool:
        """The console preempts the machine: the job's first node runs ``command`` at once (a request
        counter in ``run``, as for repairs). Slurm's own preemption needs none of this: the job runs the
        command on the SIGTERM of the partition's GraceTime. False when no job of it runs now."""
        job = self._active_job(key, self.api.jobs())
        if job is None or job_state(job) != "RUNNING":
            return False
        run = self._dir(key) / "run"
        meta_path = run / "meta.json"
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            return False
        if meta.get("checkpoint_command") != command:
            meta["checkpoint_command"] = command
            tmp = meta_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(meta, indent=1))
            owner = meta_path.stat()
            os.chown(tmp, owner.st_uid, owner.st_gid)  # the tenant's, as the console wrote it at submit
            os.chmod(tmp, 0o600)
            os.replace(tmp, meta_path)
        path = run / "slurm-checkpoint"
        try:
            count = int(path.read_text().strip() or 0)
        except (OSError, ValueError):
            count = 0
        path.write_text(str(count + 1))
        return True

    def requeue(self, *, key: str, state: dict) -> dict:
        """``scontrol requeue``: the job ends (SIGTERM: its checkpoint), keeps its id and waits in the queue
        to run again, as after Slurm's own preemption (slurmrestd 0.0.38 has no requeue: the CLI always).
        An on-demand job (``--no-requeue``) is stopped instead."""
        if not state.get("interruptible"):
            return self.stop(key=key, state=state)
        job = self._active_job(key, self.api.jobs())
        if job is not None and job_state(job) in ("RUNNING", "CONFIGURING"):
            cli = (
                self.api
                if isinstance(self.api, SlurmCli)
                else SlurmCli(bin_dir=self.options.get("BIN_DIR", ""), slurm_conf=self.options.get("SLURM_CONF", ""))
            )
            cli._run("scontrol", "requeue", str(job["job_id"]))
        return self._placement(state, None)

    def stop(self, *, key: str, state: dict) -> dict:
        """Cancel the job (its servers stop, its cards go back to Slurm); the directory stays."""
        self._verified_clear(key)
        for job in self.api.jobs():
            if job_key(job, self.prefix) == key and job_state(job) in ACTIVE - {"COMPLETING"}:
                self.api.cancel(int(job["job_id"]), user=str(job.get("user_name") or ""))
        return {**state, "stopped": True, "ports": {}, "host": ""}

    def restart(self, *, key: str, state: dict, spec: InstanceSpec | None = None) -> dict:
        """Cancel and resubmit: Slurm has no reboot in place, so the cards may change (the node too)."""
        self.stop(key=key, state=state)
        self._wait_ended(key)
        return self.start(key=key, state={**state, "stopped": True}, node="", spec=spec)

    def _wait_ended(self, key: str) -> None:
        """Wait (boundedly: ``END_WAIT_S``) until Slurm has finished ending the instance's job, so its
        servers no longer write into the directory. A job that takes longer is left to the next call."""
        deadline = time.monotonic() + float(self.options.get("END_WAIT_S", 20))
        while self._active_job(key, self.api.jobs()) is not None and time.monotonic() < deadline:
            time.sleep(0.25)

    def destroy(self, *, key: str, state: dict) -> None:
        """Cancel the job and delete the instance's directory. Already gone counts as done."""
        self.stop(key=key, state=state)
        self._wait_ended(key)
        shutil.rmtree(self._dir(key), ignore_errors=True)

    def poll(self, *, key: str, state: dict) -> Observation:
        try:
            jobs = self.api.jobs()
        except TransientBackendError:
            return Observation(Observed.UNKNOWN)
        base = self._dir(key)
        job = self._job(key, state, jobs)
        status = job_state(job) if job else ""
        if job is None or status not in ACTIVE:
            self._verified_clear(key)
            if not base.is_dir():
                return Observation(Observed.GONE)
            if status in NODE_LOST and not state.get("stopped"):
                return Observation(
                    Observed.GONE,
                    detail=f"Slurm lost the job with its node {job.get('nodes') or '?'} ({status}); the disk is kept",
                )
            return Observation(
                Observed.STOPPED, backend_state=self._placement(state, None) if state.get("host") else None
            )
        if state.get("stopped"):
            return Observation(Observed.PENDING, detail="Stopping")  # cancelled, still winding down
        restarts = int(job.get("restart_cnt") or 0)
        if status in ("RUNNING", "COMPLETING") and int(job.get("preempt_time") or 0):
            # Slurm preempted it for higher-priority work: the grace period (its checkpoint) runs.
            return Observation(
                Observed.PREEMPTED,
                detail="Preempted by Slurm for on-demand work: checkpointing, then requeued",
                backend_state=self._placement(state, None),
            )
        if restarts > int(state.get("restarts") or 0) and not state.get("interruptible"):
            # An on-demand job is never preempted: Slurm requeued it because its node failed. The
            # machine on that node is gone; the console restarts the instance (the requeued job is
            # its new run, which ``start`` adopts), so the instance says so instead of "preempted".
            return Observation(
                Observed.GONE,
                detail=f"Node {state.get('node') or job.get('nodes') or '?'} failed; restarting on another node",
                backend_state=self._placement(state, None),
            )
        if status == "PENDING" and restarts > int(state.get("restarts") or 0):
            # Requeued (preempted, or its node failed): the same job waits to run again.
            reason = str(job.get("state_reason") or "None")
            return Observation(
                Observed.PREEMPTED,
                detail=f"Requeued by Slurm: position {queue_position(job, jobs)}, reason {reason}",
                backend_state=self._placement(state, None),
            )
        if status == "PENDING":
            # "None": the scheduler has not looked at it yet.
            reason = str(job.get("state_reason") or "None")
            detail = f"Queued: position {queue_position(job, jobs)}"
            return Observation(Observed.PENDING, detail=detail if reason == "None" else f"{detail}, reason {reason}")
        if status == "COMPLETING":
            return Observation(Observed.PENDING, detail="Slurm is ending the job")
        reports = self._reports(key, job_id=str(job["job_id"]), restart=restarts, job=job, state=state)
        if 0 in reports and reports[0].get("state") in ("running", "degraded"):
            self._verified_write(key, reports[0])  # where the proxy and the gateway read it
        else:
            self._verified_clear(key)
        head = reports.get(0)
        where = job.get("nodes") or "?"
        if head is None or head.get("state") == "starting":
            return Observation(Observed.PENDING, detail=f"Starting on {where}")
        new_state = self._placement(state, reports)
        if head.get("state") == "degraded":
            return Observation(Observed.DEGRADED, detail=head.get("detail", ""), backend_state=new_state)
        if head.get("state") != "running":
            return Observation(
                Observed.PENDING, detail=head.get("detail") or f"Starting on {where}", backend_state=new_state
            )
        # A cluster runs once every node has reported (its cards and address), not just the head.
        expected = int(job.get("node_count") or 1)
        if len(reports) < expected:
            return Observation(
                Observed.PENDING, detail=f"Starting: {len(reports)} of {expected} nodes ready", backend_state=new_state
            )
        return Observation(
            Observed.RUNNING, backend_state={**new_state, "restarts": restarts}, fenced=self._fenced(key, state)
        )

    def _fenced(self, key: str, state: dict) -> tuple[tuple[str, float], ...]:
        """The previous runs that stopped themselves because a newer run held the disk (the job's
        ``slurm-fenced-*.json``): a tenant's claim, believed only when the tenant's user wrote it, and
        only as a node name and a time on its own instance's timeline."""
        uid = (state.get("tenant") or {}).get("uid")
        found = []
        for path in sorted((self._dir(key) / "run").glob("slurm-fenced-*.json")):
            if uid is not None and not self.tenants.owns(path, int(uid)):
                continue
            try:
                record = json.loads(path.read_text())
                node, at = str(record["node"]), float(record["at"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if re.fullmatch(r"[A-Za-z0-9._-]{1,64}", node) and abs(time.time() - at) < 86400:
                found.append((node, at))
        return tuple(found)

    def _job(self, key: str, state: dict, jobs: list[dict]) -> dict | None:
        job_id = state.get("job_id")
        for job in jobs:
            if job.get("job_id") == job_id and job_key(job, self.prefix) == key:
                return job
        return self._active_job(key, jobs)

    def gpu_samples(self, *, machines: Sequence[tuple[str, dict]], at: datetime) -> dict[str, list[GpuSample]]:
        """What the job's nodes last sampled (``nvidia-smi`` every 15 s, in the report each node signs),
        head first, then the other nodes by rank. A machine any of whose nodes has not reported within
        ``GPU_SAMPLE_MAX_AGE_S`` (no driver, a node hung) is left out: unknown, not idle."""
        fresh = time.time() - GPU_SAMPLE_MAX_AGE_S
        samples: dict[str, list[GpuSample]] = {}
        for key, state in machines:
            job_id = state.get("job_id")
            if not job_id or state.get("stopped"):
                continue
            reports = self._reports(key, job_id=str(job_id), restart=None, state=state)
            cards: list[GpuSample] = []
            for rank in sorted(reports):
                report = reports[rank]
                if not report.get("gpu_samples") or float(report.get("gpu_at") or 0) < fresh:
                    cards = []
                    break
                for figures in report["gpu_samples"]:
                    cards.append(
                        GpuSample(
                            card=len(cards),
                            **{k: _int(figures.get(k)) for k in _SAMPLE_FIELDS},
                            processes=_processes(figures.get("processes")),
                        )
                    )
            if cards:
                samples[key] = cards
        return samples

    def _reports(
        self, key: str, *, job_id: str, restart: int | None = 0, job: dict | None = None, state: dict | None = None
    ) -> dict[int, dict]:
        """The reports of run ``restart`` of job ``job_id``, by rank (a previous job's or run's is
        skipped: a requeued job keeps its id); ``None``: of its latest run. Each is a claim of the
        tenant's job: it counts only when the tenant's own user wrote it, and, with ``job`` (Slurm's
        record of it), when its host is in the job's allocation and its ports are ones the instance
        declared (``_verify``); a report that fails that is refused and logged."""
        run = self._dir(key) / "run"
        tenant = (state or {}).get("tenant") or {}
        found = {}
        for path in run.glob("slurm-report-*.json"):
            report = claim_read(path)
            if not report or report.get("key") != key or str(report.get("job_id")) != job_id:
                continue
            why = self._refusal(path, report, tenant=tenant, job=job, state=state or {})
            if why:
                _refused(key, job_id, why)
                continue
            found.setdefault(int(report.get("restart") or 0), {})[int(report.get("rank", 0))] = report
        if restart is None:
            return found[max(found)] if found else {}
        return found.get(restart, {})

    def _declared(self, spec: InstanceSpec | None) -> list[str]:
        declared = list(self.services)
        if spec is None or spec.app is not None:
            declared.append("app")
        if spec is None or (spec.app is not None and spec.app.webui is not None):
            declared.append("webui")
        return declared

    def _refusal(self, path: Path, report: dict, *, tenant: dict, job: dict | None, state: dict) -> str:
        """Why the console cannot believe ``report`` ("" when it can).

        The threat: the job runs the tenant's code as the tenant's user, so everything it writes,
        its report included, is the tenant's to forge; a report decides where the console's proxy and
        SSH gateway connect, with the owner's server tokens, from inside the console's network. So the
        job holds no key at all, and the console believes only what it can check against what the
        tenant does not control: the kernel (the file's owner is the tenant's user, so no other tenant
        wrote it into a loose directory), Slurm (the host is one of the nodes Slurm allocated to the
        job, by name or address: not a metadata address, the console's own host, or another job's
        node), and its own records (the ports are of the services the instance declared, within the
        job's port range: not the console's database on a shared host). What passes is then signed
        with a key only the console holds (``_verified_write``) for the proxy, which asks per request.
        What remains in the tenant's power is to point its own instance at another port of its own
        node within the range: a place its own shell reaches anyway, and where the owner's tokens
        would only be the tenant's own."""
        uid = tenant.get("uid")
        if uid is None:  # a machine found without the console's state: its directory names its tenant
            with contextlib.suppress(OSError):
                uid = path.parent.parent.stat().st_uid or None
        if uid is not None and not self.tenants.owns(path, int(uid)):
            return f"{path.name} was not written by the tenant's user {tenant.get('name', uid)}"
        if job is None:
            return ""
        allowed = self._allocation_hosts(job)
        node = str(report.get("node") or "")
        host = str(report.get("host") or "")
        if node not in allowed["names"]:
            return f"node {node!r} is not in the job's allocation ({job.get('nodes') or '?'})"
        if not _host_allowed(host, allowed["hosts"]):
            return f"host {host!r} is not an address of the job's nodes ({', '.join(sorted(allowed['hosts']))})"
        declared = set(state.get("declared") or self._declared(None))
        low, high = int(self.options.get("PORT_LOW", 20000)), int(self.options.get("PORT_HIGH", 29999))
        ports = report.get("ports") or {}
        if not isinstance(ports, dict):
            return "its ports are not a mapping"
        for service, port in ports.items():
            if service not in declared:
                return f"service {service!r} was not declared (declared: {', '.join(sorted(declared))})"
            if not isinstance(port, int) or isinstance(port, bool) or not low <= port <= high:
                return f"port {port!r} of {service} is outside the job's range {low}-{high}"
        return ""

    def _allocation_hosts(self, job: dict) -> dict[str, set[str]]:
        """The job's node names, every name and address Slurm has for them, and ``BIND`` when the
        operator set a specific address there (the servers listen on it on every node)."""
        names = set(hostlist_expand(str(job.get("nodes") or "")))
        hosts = set(names)
        bind = str(self.options.get("BIND") or "")
        if bind and bind not in ("0.0.0.0", "::"):  # noqa: S104 (a wildcard names no host)
            hosts.add(bind)  # where the operator said the servers listen
        known = self._node_addresses()
        for name in names:
            hosts |= known.get(name, set())
        return {"names": names, "hosts": hosts}

    def _node_addresses(self) -> dict[str, set[str]]:
        """Each node's ``NodeAddr`` and ``NodeHostname`` as Slurm has them (cached for a minute)."""
        now = time.monotonic()
        cached = getattr(self, "_addresses", None)
        if cached is None or now - cached[0] > 60:
            addresses = {}
            for node in self.api.nodes():
                name = str(node.get("name") or "")
                addresses[name] = {str(node[k]) for k in ("address", "hostname") if node.get(k)}
            cached = self._addresses = (now, addresses)
        return cached[1]

    # --- the console's verified copy of the head's report ----------------------------------------------

    def _verified_path(self, key: str) -> Path:
        return self.root / ".console" / f"{key}.json"

    def _verified_write(self, key: str, report: dict) -> None:
        folder = self.root / ".console"
        folder.mkdir(exist_ok=True)
        os.chmod(folder, 0o700)  # the console's alone: no tenant reads or writes it
        report_write(self._verified_path(key), secret=self.report_secret(key), report=report)

    def _verified_clear(self, key: str) -> None:
        self._verified_path(key).unlink(missing_ok=True)

    @staticmethod
    def _placement(state: dict, reports: dict[int, dict] | None) -> dict:
        """The state with where the job runs: its node(s), each node's cards, the servers' host and ports."""
        if not reports:
            return {**state, "node": "", "gpus": [], "hosts": [], "host": "", "ports": {}}
        head = reports.get(0, {})
        return {
            **state,
            "node": head.get("node", ""),
            "gpus": list(head.get("gpus") or ()),
            "hosts": [
                {"node": r.get("node", ""), "gpus": list(r.get("gpus") or ())} for _rank, r in sorted(reports.items())
            ],
            "host": head.get("host", ""),
            "ports": dict(head.get("ports") or {}),
            "login_user": head.get("login_user", ""),
        }

    def machines(self) -> list[MachineInfo]:
        jobs = self.api.jobs()
        machines = {}
        for job in jobs:
            key = job_key(job, self.prefix)
            if key is None or job_state(job) not in ACTIVE:
                continue
            observed = Observed.RUNNING if job_state(job) == "RUNNING" else Observed.PENDING
            if int(job.get("preempt_time") or 0) and job_state(job) in ("RUNNING", "COMPLETING"):
                observed = Observed.PREEMPTED  # in its grace period
            elif job_state(job) == "PENDING" and int(job.get("restart_cnt") or 0):
                observed = Observed.PREEMPTED  # requeued, waiting to run again
            _type, per_node = gres_gpus(str(job.get("tres_per_node") or "").removeprefix("gres:"))
            machines[key] = MachineInfo(
                key=key,
                node=str(job.get("nodes") or ""),
                cards=per_node * int(job.get("node_count") or 1),
                observed=observed,
                extra={"job_id": job.get("job_id"), "state": job_state(job), "reason": job.get("state_reason", "")},
            )
        if self.root.is_dir():
            for path in self.root.iterdir():
                if path.name not in machines and (path / "run" / "meta.json").is_file():
                    machines[path.name] = MachineInfo(key=path.name, node="", cards=0, observed=Observed.STOPPED)
        return list(machines.values())

    # --- the nodes -----------------------------------------------------------------------------------

    def nodes(self) -> list[NodeInfo]:
        infos = []
        for node in self.api.nodes():
            gpu_type, cards = gres_gpus(str(node.get("gres") or ""))
            if not cards:
                continue  # a CPU-only node: nothing the console can rent
            _used_type, used = gres_gpus(str(node.get("gres_used") or ""))
            infos.append(
                NodeInfo(
                    name=str(node["name"]),
                    region=self.region,
                    gpu_model=self.gpu_types.get(gpu_type, gpu_type),
                    cards=cards,
                    healthy=not (node_states(node) & UNHEALTHY),
                    free_cards=max(0, cards - used),
                    detail=_node_detail(node),
                )
            )
        return infos

    # --- entry points -----------------------------------------------------------------------------------

    def _head(self, key: str) -> dict | None:
        """The head's report as the console verified it at its last poll (the proxy asks per request,
        without state); one that does not verify under the console's key is refused, and logged."""
        path = self._verified_path(key)
        if not path.exists():
            return None
        head = report_read(path, secret=self.report_secret(key))
        if head is None:
            _refused(key, "?", f"{path} is not signed with the console's key")
            return None
        if head.get("key") != key or head.get("state") not in ("running", "degraded"):
            return None
        return head

    def entry_points(self, *, key: str, state: dict) -> EntryPoints:
        head = self._head(key)
        if head is None:
            return EntryPoints()
        ports = head.get("ports") or {}
        return EntryPoints(
            web=tuple(s for s in ("lab", "code", "app", "webui") if s in ports),
            ssh_port=ports.get("ssh"),
            ssh_user=head.get("login_user", "") if "ssh" in ports else "",
            # The node the job runs on (its address, as the job reported it): direct SSH goes there.
            ssh_host=(head.get("host") or "") if "ssh" in ports else "",
        )

    def port_target(self, *, key: str, port: int):
        """The head node, where the job's report says it runs."""
        head = self._head(key)
        if head is None:
            return None
        return ProxyTarget(host=head.get("host") or "127.0.0.1", port=int(port), strip_prefix=True)

    def ssh_target(self, *, key: str) -> SshTarget | None:
        """The head node's sshd, where the job's report says it listens."""
        head = self._head(key)
        port = (head or {}).get("ports", {}).get("ssh")
        if head is None or not port:
            return None
        return SshTarget(host=head.get("host") or "127.0.0.1", port=int(port), user=head.get("login_user", ""))

    def proxy_target(self, *, key: str, service: str):
        head = self._head(key)
        if head is None:
            return None
        port = (head.get("ports") or {}).get(service)
        host = head.get("host") or "127.0.0.1"
        if not port:
            return None
        secrets = self.server_secrets(key)
        if service == "lab":
            token = secrets["lab"]
            return ProxyTarget(
                host=host,
                port=int(port),
                strip_prefix=False,
                headers=(("Authorization", f"token {token}"),),
                secrets=(token,),
            )
        if service == "code":
            return ProxyTarget(
                host=host,
                port=int(port),
                strip_prefix=True,
                cookies=((CODE_SERVER_COOKIE, secrets["code"]),),
                secrets=(secrets["code"],),
            )
        if service in ("app", "webui"):
            meta = {}
            with contextlib.suppress(OSError, ValueError):
                meta = json.loads((self._dir(key) / "run" / "meta.json").read_text())
            app = meta.get("app") or {}
            if service == "webui":
                webui = app.get("webui") or {}
                return ProxyTarget(host=host, port=int(port), strip_prefix=not webui.get("serves_base_path", True))
            return ProxyTarget(
                host=host,
                port=int(port),
                strip_prefix=not app.get("serves_base_path", True),
                headers=(("Authorization", f"Bearer {secrets['app']}"),),  # vLLM's --api-key $APP_API_KEY
                secrets=(secrets["app"],),
            )
        return None


def _node_detail(node: dict) -> str:
    states = sorted(node_states(node) - {"IDLE", "MIXED", "ALLOCATED"})
    reason = str(node.get("reason") or "").strip()
    return ", ".join(filter(None, ["+".join(states), reason]))
