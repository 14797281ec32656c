"""The program a Slurm job of the console runs on each of its nodes: ``python -m providers.slurm.job``.

The Slurm backend (``providers.slurm.backend``) submits a batch script that runs this once per
allocated node (``srun --ntasks-per-node=1``). On the first node (Slurm's rank 0) it runs the
instance's image in a rootless podman container under the image contract (``--engine=podman``, the
default: ``providers.slurm.pod``), or, where the backend's ``ENGINE`` is "process", starts the user
servers as processes with the local backend's runtime (``providers.local.runtime.supervisor.LocalRuntime``:
JupyterLab, code-server, sshd, the same commands, secrets and clean environment as on the local
backend) plus the instance's app when it has one, with ``CUDA_VISIBLE_DEVICES`` as Slurm set it for
the allocation. A node without podman, or an image that cannot be pulled, fails the launch with that
reason: the job never falls back to host processes for a container image. Every node then reports where it runs and which cards it got, and waits; on
``scancel`` (SIGTERM) it stops everything it started and exits, leaving the instance's directory.

How the console learns where the servers listen: a *report* in the instance's directory, which lives
on the filesystem the cluster shares with the console (it must: it is the instance's disk, which
follows the instance from node to node). We chose a file over a POST to the console because compute
nodes often cannot reach the console at all (private cluster networks, a console behind a firewall),
while the shared filesystem is always there; and a file needs no inbound endpoint on the console to
harden.

The threat model. This program runs as the tenant's own Unix user, in the same job as the tenant's
code: whatever it knows, the tenant knows; whatever it writes, the tenant could have written. A key
given to it would be the tenant's key (an earlier version signed reports with a ``report.key`` that
the tenant could read, and so point the console's proxy at a cloud metadata address). So the job
holds no key, and its report is a *claim*. The console (``SlurmBackend._refusal``) believes it only
as far as it can check it against what the tenant does not control: the kernel (the file is owned by
the tenant's user, so no other tenant put it there), Slurm (the node and host are of the job's
allocation) and its own records (the ports are of the services the instance declared, within the
job's port range). What passes, the console signs with a key derived from its own secret into a
directory only it can read, for the proxy and the gateway; a forged claim, or a verified copy signed
with any other key, is refused and logged as a security event.

This module must not import Django: it runs on compute nodes with only the console's code and its
Python environment on the shared filesystem.

Interruptible instances run as requeueable jobs in the cluster's low-priority partition. When Slurm
preempts one (``PreemptMode=REQUEUE``), the job step gets SIGTERM at the start of the partition's
``GraceTime``: rank 0 runs the owner's checkpoint command (from the instance's metadata) in the
instance's environment, stops the servers, and then *waits* for the kill at the grace period's end,
because a job that exits 0 by itself ends COMPLETED and is not requeued. Slurm requeues it with the
same job id and ``SLURM_RESTART_COUNT`` one higher; every report names that count, so the console
tells the run that booted again from the one that was preempted. The console may also ask for a
checkpoint (``slurm-checkpoint`` in ``run``, a counter like ``slurm-repair``).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from providers.local.runtime.gpus import GpuDiscoveryError, GpuReading, GpuRegistry, gpu_read
from providers.local.runtime.ports import PortRegistry
from providers.local.runtime.supervisor import LocalRuntime
from providers.slurm.pod import PodRuntime

REPORT_VERSION = 1
# How long a checkpoint command may run when the console asks for one (Slurm's own preemption
# bounds it by the partition's GraceTime: the kill comes then).
CHECKPOINT_TIMEOUT_S = 600
# How long a preempted step waits for Slurm's kill before giving up and exiting non-zero.
PREEMPT_WAIT_S = 900
# A SIGTERM this long after the first is Slurm's next one, not the first one forwarded again by srun.
TERM_REPEAT_S = 1.0
# How long a new run waits for the run it superseded (left on a node declared dead) to say it stopped.
FENCE_WAIT_S = 3.0
# How often the head of a run asks its servers when someone last used them (JupyterLab's activity, an
# SSH or VS Code session): the report carries it, so idle auto-stop works on Slurm for a run without GPU
# samples (no-GPU mode, or a node without the driver). A report is rewritten at least this often.
ACTIVITY_CHECK_S = 30.0
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


# --- Reports: the job's claim, and the console's signed copy ------------------------------------------


def sign(secret: str, body: str) -> str:
    return hmac.new(secret.encode(), body.encode(), hashlib.sha256).hexdigest()


def report_write(path: Path, *, secret: str, report: dict) -> None:
    """Write ``report`` signed with ``secret``, atomically (a reader never sees half a file)."""
    body = json.dumps(report, sort_keys=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"body": body, "hmac": sign(secret, body)}))
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def report_read(path: Path, *, secret: str) -> dict | None:
    """The report in ``path`` if its signature verifies under ``secret``, else None."""
    try:
        envelope = json.loads(path.read_text())
        body = envelope["body"]
        if not hmac.compare_digest(sign(secret, body), str(envelope["hmac"])):
            return None
        report = json.loads(body)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return report if isinstance(report, dict) else None


def report_path(run_dir: Path, rank: int) -> Path:
    return run_dir / f"slurm-report-{rank}.json"


def claim_write(path: Path, report: dict) -> None:
    """What the job says about itself (unsigned: it holds no key), atomically."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(report, sort_keys=True))
    os.replace(tmp, path)


def claim_read(path: Path) -> dict | None:
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


# --- On the node ------------------------------------------------------------------------------------


def job_cards(readings: dict[int, GpuReading], gpus: list[str]) -> list[GpuReading]:
    """The job's cards among what ``nvidia-smi`` lists on its node, in ``CUDA_VISIBLE_DEVICES`` order.

    Without device cgroups nvidia-smi lists every card of the node and Slurm's indices name the job's;
    with ``ConstrainDevices`` it lists only the job's, renumbered from 0, as many as the job has. Any
    other answer is not the job's to report: nothing (a gap in the charts, not idleness)."""
    indices = [int(g) for g in gpus if g.isdigit()]
    if not indices or len(indices) != len(gpus):
        return []
    if set(indices) <= set(readings):
        return [readings[i] for i in indices]
    if len(readings) == len(indices):
        return [readings[i] for i in sorted(readings)]
    return []


# --- The job's memory cgroup (Slurm's task/cgroup with ConstrainRAMSpace) -----------------------------

CGROUP_MEMORY = Path("/sys/fs/cgroup/memory")


def job_memory_cgroup(proc_cgroup: str, *, mount: Path = CGROUP_MEMORY) -> Path | None:
    """The job's own memory cgroup (``…/job_<id>``, cgroup v1) from ``/proc/self/cgroup``'s text;
    None when the job has none (task/cgroup off, or cgroup v2)."""
    for line in proc_cgroup.splitlines():
        _number, controllers, path = [*line.split(":", 2), "", ""][:3]
        if "memory" not in controllers.split(","):
            continue
        parts = path.strip("/").split("/")
        for depth, part in enumerate(parts):
            if part.startswith("job_"):
                return mount.joinpath(*parts[: depth + 1])
    return None


def oom_kills(cgroup: Path | None) -> int | None:
    """How many processes the kernel's OOM killer has killed in the job's cgroup and every step's below
    it (v1 counts a kill in the victim's own cgroup, ``oom_kill`` in ``memory.oom_control``); None
    when unknown."""
    if cgroup is None:
        return None
    total, found = 0, False
    for folder, _dirs, files in os.walk(cgroup):
        if "memory.oom_control" not in files:
            continue
        with contextlib.suppress(OSError, ValueError):
            for line in (Path(folder) / "memory.oom_control").read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == "oom_kill":
                    total, found = total + int(value), True
    return total if found else None


def memory_limit_mib(cgroup: Path | None) -> int | None:
    try:
        return int((cgroup / "memory.limit_in_bytes").read_text()) // (1 << 20) if cgroup else None
    except (OSError, ValueError):
        return None


class NodeRuntime(LocalRuntime):
    """The local runtime as a tenant's job runs it: the job may write only its own instance's
    directory (the instances' root is the console's, 0711), so the instance's lock lives there."""

    @contextlib.contextmanager
    def _lock(self, key: str):
        with open(self.paths(key).run / ".runtime.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield


class Job:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.key = args.key
        self.rank = int(os.environ.get("SLURM_PROCID", "0"))
        self.job_id = os.environ.get("SLURM_JOB_ID", "")
        self.restart = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
        self.node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
        self.gpus = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]
        # The node's own indices of the job's cards (what the report names): with ConstrainDevices,
        # Slurm numbers CUDA_VISIBLE_DEVICES from 0 within the job's device cgroup, and names the
        # allocated cards in SLURM_STEP_GPUS.
        physical = os.environ.get("SLURM_STEP_GPUS") or os.environ.get("SLURM_JOB_GPUS") or ""
        self.node_gpus = [g for g in physical.split(",") if g] or self.gpus
        services = [s for s in args.services.split(",") if s]
        public_mounts = dict(item.split("=", 1) for item in args.public_mount)
        # The instance's image in a rootless container (``providers.slurm.pod``), or, only where the
        # backend's ENGINE asks for it, its servers as the tenant's processes from the console's code.
        self.runtime: NodeRuntime | PodRuntime
        if args.engine == "podman":
            self.runtime = PodRuntime(
                root=args.root,
                services=services,
                url_prefix=args.url_prefix,
                bind=args.bind,
                public_mounts=public_mounts,
                registries_insecure=[r for r in args.registries_insecure.split(",") if r],
            )
        else:
            self.runtime = NodeRuntime(
                root=args.root,
                services=services,
                port_low=args.port_low,
                port_high=args.port_high,
                url_prefix=args.url_prefix,
                jupyter_bin=args.jupyter_bin,
                code_server_entry=args.code_server_entry,
                stop_timeout=3.0,
                bind=args.bind,
                public_mounts=public_mounts,
            )
        # Ports are per host, not per instance root: every job on this host (several Slurm nodes may
        # share one host, as in the test cluster) takes its ports from registries on local disk.
        # Each tenant's job runs as its own user: one registry file per user in a sticky directory
        # that every user may create files in (as /tmp), so no tenant writes another's records; the
        # bind test before every allocation keeps two users' jobs off one port.
        ports_dir = Path(args.ports_dir)
        with contextlib.suppress(FileExistsError):
            ports_dir.mkdir(parents=True)
            os.chmod(ports_dir, 0o1777)  # noqa: S103 (sticky, as /tmp: every tenant its own file)
        self.runtime.ports = PortRegistry(
            ports_dir / f"ports-{os.getuid()}.json", low=args.port_low, high=args.port_high
        )
        # Slurm allocates the cards; the runtime's own card registry is the job's alone.
        self.runtime.gpus = GpuRegistry(ports_dir / f"gpus-{os.getuid()}.json")
        if isinstance(self.runtime, PodRuntime):
            self.runtime.node_gpus = list(self.node_gpus) if self.gpus else []
        self.paths = self.runtime.paths(self.key)
        self.stopping = False
        self.terms: list[float] = []  # when each SIGTERM came (monotonic)
        self.repairs_seen = self._repair_requests()
        # GPU samples for the console's charts and idle stop, carried in the signed report.
        self.gpu_samples: list[dict] = []
        self.gpu_at: float | None = None
        self._next_sample = 0.0
        # When someone last used the servers (epoch seconds; None until first asked).
        self.active_at: float | None = None
        self._next_activity = 0.0
        self.checkpoints_seen = self._counter("slurm-checkpoint")
        # Processes the kernel killed at the job's memory limit (--mem): the instance says so.
        try:
            self.memory_cgroup = job_memory_cgroup(Path("/proc/self/cgroup").read_text())
        except OSError:
            self.memory_cgroup = None
        self.oom_seen = oom_kills(self.memory_cgroup) or 0

    # The advertised address: the bind address, or this node's name when it binds every interface.
    @property
    def host(self) -> str:
        if self.args.bind in ("0.0.0.0", "::"):  # noqa: S104 (what the servers bind is the operator's choice)
            return socket.getfqdn()
        return self.args.bind

    def _meta(self) -> dict:
        return self.runtime.meta(self.key) or {}

    def _repair_requests(self) -> int:
        return self._counter("slurm-repair")

    def _counter(self, name: str) -> int:
        try:
            return int((self.paths.run / name).read_text().strip() or 0)
        except (OSError, ValueError):
            return 0

    def checkpoint(self, *, timeout: float) -> int | None:
        """Run the owner's checkpoint command in the instance's environment (its home, cards and
        mounts, none of the console's variables); its exit status, or None when there is none to run."""
        meta = self._meta()
        command = str(meta.get("checkpoint_command") or "").strip()
        if not command:
            return None
        argv = ["/bin/bash", "-c", command]
        if isinstance(self.runtime, PodRuntime):  # in the instance's container, as its user
            argv, env = self.runtime.exec_argv(self.key, command), self.runtime.podman.env()
        else:
            try:
                env = self.runtime._environment(self.key, self.paths, meta)
            except (KeyError, TypeError):  # the servers never started: a plainer environment
                env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(self.paths.home), "LANG": "C.UTF-8"}
                env["CUDA_VISIBLE_DEVICES"] = ",".join(self.gpus)
        log = self.paths.run / "checkpoint.log"
        with open(log, "a") as out:
            out.write(f"--- checkpoint at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}: {command}\n")
            out.flush()
            try:
                done = subprocess.run(  # noqa: S603 (the owner's own command, in the owner's instance)
                    argv,
                    cwd=self.paths.home,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=timeout,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                out.write(f"--- checkpoint still running after {timeout:.0f} s: stopped\n")
                return -1
        return done.returncode

    def _superseded(self) -> bool:
        """Whether a later run of this instance (a later job, or a later run of this requeued one) has
        reported: Slurm's job ids only grow. A previous run's report (this run has not written one
        yet) does not count."""
        try:
            current = json.loads(report_path(self.paths.run, self.rank).read_text())
            theirs = (int(current.get("job_id") or 0), int(current.get("restart") or 0))
            mine = (int(self.job_id or 0), self.restart)
        except (OSError, ValueError, KeyError, TypeError):
            return False
        return theirs > mine

    # --- fencing: one run of an instance at a time on its disk -------------------------------------------

    def _run_path(self) -> Path:
        return self.paths.run / f"slurm-run-{self.rank}.json"

    def _claimed(self) -> dict:
        """The last claim on this instance's disk (``slurm-run-<rank>.json``)."""
        try:
            current = json.loads(self._run_path().read_text())
        except (OSError, ValueError):
            return {}
        return current if isinstance(current, dict) else {}

    def _current_run(self) -> tuple[int, int]:
        """The run that last claimed this instance's disk: (job id, restart)."""
        current = self._claimed()
        try:
            return int(current.get("job_id") or 0), int(current.get("restart") or 0)
        except (ValueError, TypeError):
            return 0, 0

    def _mine(self) -> tuple[int, int]:
        return int(self.job_id or 0), self.restart

    def claim(self) -> bool:
        """Claim the disk for this run (a later job, or a later run of a requeued one: Slurm's job ids
        and restart counts only grow); False when a later run holds it and has not ended."""
        ended = bool(self._claimed().get("ended"))
        previous = self._current_run()
        if previous > self._mine() and not ended:
            return False
        self._claim_write(ended=False)
        if previous != (0, 0) and previous != self._mine() and not ended:
            # A run left on a node declared dead may still be up: it stops within moments of this
            # claim (``fence``) where its node lives; a node really gone says nothing, hence the bound.
            fenced = self.paths.run / f"slurm-fenced-{previous[0]}-{previous[1]}-{self.rank}.json"
            deadline = time.monotonic() + FENCE_WAIT_S
            while not fenced.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            if self.rank == 0:
                # Its servers' records name processes of that run, on its node: never this run's.
                for pidfile in self.paths.run.glob("*.pid"):
                    pidfile.unlink(missing_ok=True)
        return True

    def _claim_write(self, *, ended: bool) -> None:
        path = self._run_path()
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        claim = {"job_id": self.job_id, "restart": self.restart, "node": self.node, "at": time.time()}
        tmp.write_text(json.dumps({**claim, "ended": ended}))
        os.replace(tmp, path)

    def release(self) -> None:
        """This run ended by itself (stopped, preempted): the next run need not wait for it."""
        if self._current_run() == self._mine():
            with contextlib.suppress(OSError):
                self._claim_write(ended=True)

    def fenced(self) -> bool:
        """Whether a later run claimed the disk: this run outlived its node (slurmd died, its processes
        did not) and the instance runs elsewhere now."""
        return self._current_run() > self._mine()

    def fence(self) -> None:
        """Stop everything this run started (its cgroup's processes and its descendants: never the new
        run's, whose servers share the disk's runtime files) and record it for the console."""
        own = os.getpid()
        if isinstance(getattr(self, "runtime", None), PodRuntime):  # its root is a uid of the tenant's range
            with contextlib.suppress(Exception):
                self.runtime.stop(self.key)
        for pid in sorted(_own_processes(own), reverse=True):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        record = {"job_id": self.job_id, "restart": self.restart, "node": self.node, "at": time.time()}
        record["superseded_by"] = list(self._current_run())
        path = self.paths.run / f"slurm-fenced-{self.job_id}-{self.restart}-{self.rank}.json"
        with contextlib.suppress(OSError):
            path.write_text(json.dumps(record))

    def _interruptible(self) -> bool:
        return bool(self._meta().get("interruptible"))

    def report(self, state: str, *, ports: dict | None = None, detail: str = "") -> None:
        meta = self._meta()
        claim_write(
            report_path(self.paths.run, self.rank),
            {
                "v": REPORT_VERSION,
                "key": self.key,
                "job_id": self.job_id,
                "rank": self.rank,
                "restart": self.restart,
                "node": self.node,
                "host": self.host,
                "gpus": self.node_gpus,
                "state": state,
                "detail": detail,
                "ports": ports or {},
                "login_user": meta.get("login_user") or getattr(self.runtime, "login_user", ""),
                "at": time.time(),
                "gpu_samples": self.gpu_samples,
                "gpu_at": self.gpu_at,
                "active_at": self.active_at,
            },
        )

    def check_activity(self) -> bool:
        """Every ``ACTIVITY_CHECK_S``, ask the runtime how long nobody has used the servers; True when
        it did (the report is then written again, which also keeps it fresh for the console)."""
        now = time.monotonic()
        if now < self._next_activity:
            return False
        self._next_activity = now + ACTIVITY_CHECK_S
        try:
            idle = self.runtime.idle_seconds(self.key)
        except Exception:  # a server that does not answer is no reason to end the run
            idle = None
        self.active_at = None if idle is None else time.time() - idle
        return True

    def sample_gpus(self) -> bool:
        """Every ``--gpu-sample-s`` seconds, read this node's cards of the job; True when it did (the
        report is then written again). A node without the driver samples nothing."""
        now = time.monotonic()
        if self.args.gpu_sample_s <= 0 or now < self._next_sample:
            return False
        self._next_sample = now + self.args.gpu_sample_s
        try:
            readings = gpu_read(nvidia_smi=self.args.nvidia_smi)
        except GpuDiscoveryError:
            readings = {}
        self.gpu_samples = [
            {
                "utilization_pct": r.utilization_pct,
                "memory_used_mib": r.memory_used_mib,
                "memory_total_mib": r.memory_total_mib,
                "power_w": r.power_w,
                "temperature_c": r.temperature_c,
                "processes": [[a.pid, a.name, a.memory_used_mib] for a in r.processes],
            }
            for r in job_cards(readings, self.gpus)
        ]
        self.gpu_at = time.time() if self.gpu_samples else None
        return True

    def start_servers(self) -> dict:
        """Start what is not running: the entry points and, when the instance has one, its app (and
        the app's WebUI), all through the local runtime, which keeps the app the metadata names."""
        meta = self._meta()
        state = self.runtime.start(
            self.key,
            owner_ref=meta.get("owner_ref", ""),
            gpus=self.gpus,
            ssh_public_keys=meta.get("ssh_public_keys", ()),
        )
        return dict(state["ports"])

    def observe(self) -> tuple[str, str]:
        """running, starting or degraded (a server or the app died), and what died."""
        status = self.runtime.status(self.key)
        crashed = [s for s in status.servers.values() if s.state == "crashed"]
        details = [
            f"{s.name} stopped unexpectedly"
            + (f" ({s.detail.strip().splitlines()[-1][:160]})" if s.detail.strip() else "")
            for s in crashed
        ]
        kills = oom_kills(self.memory_cgroup) or 0
        if kills > self.oom_seen:
            limit = memory_limit_mib(self.memory_cgroup)
            details.insert(
                0,
                f"Out of memory: the kernel killed {kills - self.oom_seen} process(es) at the instance's memory limit"
                + (f" ({limit} MiB)" if limit else ""),
            )
        if details:
            return "degraded", "; ".join(details)
        overall = status.overall
        return ("running" if overall in ("running", "stopped") else "starting"), ""

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        if not self.claim():
            return 0  # a later run of the instance holds its disk: this one never starts
        if self.rank != 0:
            # A worker node of a cluster: it reports its node and cards and holds the allocation.
            self.report("running")
            while not self.stopping:
                if self.fenced():
                    self.fence()
                    return 0
                if self.sample_gpus():
                    self.report("running")
                time.sleep(0.2)
            self.report("stopped")
            self.release()
            return 0
        ports: dict = {}
        try:
            ports = self.start_servers()
            last = None
            while not self.stopping:
                if self.fenced():
                    # A later run claimed the disk (this run's node was declared dead): stop at once,
                    # touching neither the new run's servers nor its reports.
                    self.fence()
                    return 0
                requests = self._repair_requests()
                if requests != self.repairs_seen:  # the console asked for crashed servers to be restarted
                    self.repairs_seen = requests
                    self.oom_seen = oom_kills(self.memory_cgroup) or 0  # the console has heard of those
                    ports = self.start_servers()
                checkpoints = self._counter("slurm-checkpoint")
                if checkpoints != self.checkpoints_seen:  # the console is about to preempt it
                    self.checkpoints_seen = checkpoints
                    self.checkpoint(timeout=CHECKPOINT_TIMEOUT_S)
                state, detail = self.observe()
                sampled = self.sample_gpus()
                if self.check_activity() or sampled or (state, detail, ports) != last:
                    self.report(state, ports=ports, detail=detail)
                    last = (state, detail, ports)
                # While the servers start, look often (the launch waits on it); once they run, calmly.
                time.sleep(0.25 if state == "running" else 0.05)
        except Exception as exc:
            self.report("failed", detail=str(exc)[:500])
            raise
        finally:
            # A run that outlived its node (slurmd died; the processes did not) while the console or
            # Slurm started the instance again elsewhere: the servers and reports are the new run's
            # now. It leaves them alone.
            superseded = self._superseded() or self.fenced()
            if not superseded:
                self._wind_down(ports)
        if superseded:
            return 0
        self.report("stopped")
        self.release()
        if self._interruptible():
            # Exiting by itself would end the job COMPLETED and Slurm would not requeue it: wait for
            # the end of the grace period. There Slurm requeues the job and sends SIGTERM again (then,
            # KillWait later, SIGKILL): that second SIGTERM ends the wait at once. Waiting for the
            # SIGKILL instead would keep the node busy KillWait longer, and Slurm stops holding back
            # further preemption KillWait + MessageTimeout after its last one: a cluster a little slow
            # to reap the job then takes a second victim for the same on-demand job.
            deadline = time.monotonic() + PREEMPT_WAIT_S
            while time.monotonic() < deadline and not self._killed():
                time.sleep(0.1)
            return 1
        return 0

    def _wind_down(self, ports: dict) -> None:
        if self.stopping and self._interruptible():
            # SIGTERM to an interruptible job: Slurm's preemption (or a stop). The checkpoint first,
            # while the servers and the user's processes still run; the kill ends it.
            self.report("checkpointing", ports=ports, detail="Preempted: running the checkpoint command")
            self.checkpoint(timeout=CHECKPOINT_TIMEOUT_S)
        self.runtime.stop(self.key)
        self.runtime.ports.release(self.key)

    def _on_term(self, signum, frame) -> None:
        self.stopping = True
        self.terms.append(time.monotonic())

    def _killed(self) -> bool:
        """Whether a SIGTERM came after the one that began the grace period: Slurm's requeue (or a
        scancel) at its end. ``srun`` forwards the signal it gets to the step as well, so one signal
        from Slurm may arrive twice within moments; a second one counts only a second or more later."""
        return len(self.terms) >= 2 and self.terms[-1] - self.terms[0] >= TERM_REPEAT_S


def _own_processes(own: int) -> set[int]:
    """This run's other processes: those in its job step's cgroup (Slurm's proctrack/cgroup puts every
    process the step starts there, daemons included), and its descendants by parent (no cgroup)."""
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _n, controllers, path = line.split(":", 2)
            if path in ("", "/") or "job_" not in path:
                continue
            base = Path("/sys/fs/cgroup")
            names = [c for c in controllers.split(",") if c] or [""]
            for name in names:
                procs = (
                    (base / name / path.lstrip("/") / "cgroup.procs")
                    if name
                    else base / path.lstrip("/") / "cgroup.procs"
                )
                with contextlib.suppress(OSError, ValueError):
                    found |= {int(p) for p in procs.read_text().split()}
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    frontier = {own}
    while frontier:
        children = {pid for pid, parent in parents.items() if parent in frontier and pid not in found}
        found |= children
        frontier = children
    uid = os.getuid()
    mine = set()
    for pid in found - {own}:
        with contextlib.suppress(OSError):
            if os.stat(f"/proc/{pid}").st_uid == uid:
                mine.add(pid)
    return mine


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m providers.slurm.job", description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="the instances' directory on the shared filesystem")
    parser.add_argument("--key", required=True)
    parser.add_argument("--services", default="lab,code,ssh")
    parser.add_argument(
        "--engine", choices=("podman", "process"), default="process", help="the backend's ENGINE (the script says)"
    )
    parser.add_argument("--registries-insecure", default="127.0.0.1,localhost", help="pulled over plain HTTP")
    parser.add_argument("--bind", default="127.0.0.1", help="the address the servers listen on")
    parser.add_argument("--url-prefix", default="/i/")
    parser.add_argument("--port-low", type=int, default=20000)
    parser.add_argument("--port-high", type=int, default=29999)
    parser.add_argument("--ports-dir", default="/tmp/console-slurm-ports")  # noqa: S108 (node-local on purpose)
    parser.add_argument("--jupyter-bin", default="")
    parser.add_argument("--code-server-entry", default="")
    parser.add_argument("--nvidia-smi", default="nvidia-smi", help="read every --gpu-sample-s seconds")
    parser.add_argument("--gpu-sample-s", type=float, default=15.0, help="0: report no GPU samples")
    parser.add_argument(
        "--public-mount",
        action="append",
        default=[],
        help="PATH=DIR: read-only in every instance (/models=/shared/models)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    job = Job(parse_args(sys.argv[1:] if argv is None else argv))
    with contextlib.suppress(KeyboardInterrupt):
        return job.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
