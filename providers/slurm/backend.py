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
- Two ways to talk to Slurm, the same operations: slurmrestd with JWT (``REST_URL``; ``rest``, in the
  newest API version both sides speak: ``openapi``), or the command-line tools (``sbatch``,
  ``squeue --json``, ``scancel``, ``sinfo --json``; ``cli``) otherwise. Either's answers are read
  into one shape (``records``), whichever Slurm release wrote them.
- The module's neighbours, by job: ``script`` renders the batch script, ``reports`` reads and checks
  what the job reports, ``tenants`` makes the tenants' users, ``job`` is the program on the nodes.
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
            # The API version: by default the newest the server's OpenAPI document offers of v0.0.38
            # (Slurm 22.05) and v0.0.40 to v0.0.44 (23.11 to 25.11; ``providers.slurm.openapi``).
            "REST_API": "",                      # or pin one: "v0.0.41"
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
            # How the job runs the instance: "podman" (the default, as on the local backend) runs the
            # image the owner chose (its pinned digest, else IMAGES[slug], else DEFAULT_IMAGE) with the
            # tenant's rootless podman under the image contract (``providers.slurm.pod``); "process"
            # runs the servers as the tenant's processes from PYTHON's environment (no image: only
            # where the region's settings ask for it).
            "ENGINE": "podman",
            "IMAGES": {"pytorch-2.5-cu124": "registry.example:5000/console/pytorch:2.5"},
            "DEFAULT_IMAGE": "",                 # default: localhost/console/minimal:latest
            "REGISTRIES_INSECURE": ["127.0.0.1", "localhost"],  # pulled over plain HTTP
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
import math
import os
import shutil
import time
from pathlib import Path

from django.conf import settings

from core.user_content import ProxyTarget
from providers.base import (
    BOOT_FAILED,
    ClustersCapability,
    EntryPoints,
    EntryPointsCapability,
    GpuMetricsCapability,
    InstanceSpec,
    MachineInfo,
    NodeInfo,
    Observation,
    Observed,
    PermanentBackendError,
    ProvisioningBackend,
    SnapshotsCapability,
    SshTarget,
    Tenant,
    TransientBackendError,
)
from providers.local.runtime.base import LocalRuntimeError
from providers.local.runtime.container_spec import DEFAULT_IMAGE
from providers.local.runtime.disk_snapshots import DiskSnapshots
from providers.local.runtime.servers import CODE_SERVER_COOKIE
from providers.local.runtime.wandb_runs import wandb_runs_read
from providers.slurm.cli import SlurmCli
from providers.slurm.job import claim_read, report_path
from providers.slurm.records import (
    ACTIVE,
    NODE_LOST,
    UNHEALTHY,
    gres_gpus,
    hostlist_expand,
    job_key,
    job_state,
    node_detail,
    node_states,
    queue_position,
    slurm_count,
)
from providers.slurm.reports import GPU_SAMPLE_MAX_AGE_S, JobReports, _processes, report_idle_seconds
from providers.slurm.rest import SlurmRest
from providers.slurm.script import engine, job_script, nccl_env
from providers.slurm.tenants import TenantAccounts, check_tenant, refuse_root_user

STATE_VERSION = 1
DEFAULT_SERVICES = ("lab", "code", "ssh")


# The names this module had before it was split by job (tests and older code import them from here).
__all__ = [
    "GPU_SAMPLE_MAX_AGE_S",
    "SlurmBackend",
    "SlurmCli",
    "SlurmRest",
    "_processes",
    "gres_gpus",
    "hostlist_expand",
    "job_key",
    "job_state",
    "node_states",
    "queue_position",
]


# --- The backend -------------------------------------------------------------------------------------------


class SlurmBackend(
    JobReports,
    ClustersCapability,
    EntryPointsCapability,
    GpuMetricsCapability,
    SnapshotsCapability,
    ProvisioningBackend,
):
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
        self.engine = engine(o)
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
                api=str(o.get("REST_API") or ""),  # "": the newest the server offers
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
            if self.engine == "podman" and (spec.image_ref or spec.image or not meta.get("image")):
                # A start without its spec (``_spec_from_state``) names no image: it keeps the one it ran.
                meta["image"] = self.image_for(spec)
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

    def image_for(self, spec: InstanceSpec) -> str:
        """The image the job runs: the digest the console pinned at launch, else the catalogue slug's
        mapping (``IMAGES``), else ``DEFAULT_IMAGE`` (as on the local backend). One the node cannot
        pull fails the launch with that reason (``_boot_failure``)."""
        images = dict(self.options.get("IMAGES") or {})
        return str(
            spec.image_ref
            or images.get(spec.image)
            or images.get("default")
            or self.options.get("DEFAULT_IMAGE")
            or DEFAULT_IMAGE
        )

    def _boot_failure(self, key: str, state: dict) -> str:
        """Why the instance's current job could not boot it (its image not pulled, podman missing on
        the node), from the job's own report; "" when it did not say so. The tenant wrote it: it is
        shown to the tenant only, as the launch's reason, and trusted for nothing else."""
        path = report_path(self._dir(key) / "run", 0)
        uid = (state.get("tenant") or {}).get("uid")
        if uid is None or not path.is_file() or not self.tenants.owns(path, int(uid)):
            return ""
        report = claim_read(path) or {}
        if report.get("state") != "failed" or str(report.get("job_id")) != str(state.get("job_id")):
            return ""
        return str(report.get("detail") or "the job could not start the instance")[:500]

    def _nccl_env(self) -> dict[str, str]:
        return nccl_env(self.options)

    def _script(self, key: str, *, tenant: Tenant, nodes: int = 1) -> str:
        return job_script(
            options=self.options, root=self.root, key=key, services=self.services, tenant=tenant, nodes=nodes
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
            # No cards (a run without GPU): no GRES at all, so the job takes none of the node's.
            "gres": (f"gpu:{gpu_type}:{spec.gpu_count}" if gpu_type else f"gpu:{spec.gpu_count}")
            if spec.gpu_count
            else "",
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
                job["switches"] = switches  # slurmrestd: ``required_switches``
        if (self.options.get("PIN_NODE") or spec.pin) and spec.node:
            # Where the console placed it; always for work that took preempted machines' cards, so
            # that Slurm does not preempt a second machine elsewhere while the first winds down.
            names = [spec.node, *spec.peer_nodes] if spec.pin else [spec.node]
            job["extra"].append(f"--nodelist={','.join(names)}")
            job["required_nodes"] = names  # slurmrestd: ``required_nodes``
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
        return max(mine, key=lambda j: slurm_count(j.get("job_id"))) if mine else None

    # --- the machine ------------------------------------------------------------------------------------

    def create(self, *, key: str, spec: InstanceSpec) -> dict:
        """Submit the instance's job, or find the one a previous attempt submitted (by its name)."""
        _secrets_refused(spec)
        existing = self._active_job(key, self.api.jobs())
        if existing is not None:
            return {
                "v": STATE_VERSION,
                "tenant": dataclasses.asdict(spec.tenant) if spec.tenant else None,
                "job_id": slurm_count(existing["job_id"]),
                "nodes": spec.nodes,
                "gpu_count": spec.gpu_count,
                "gres_type": self._gres_type(spec.gpu_model),
                "dir": str(self._dir(key)),
                "stopped": False,
                "interruptible": spec.interruptible,
                "restarts": slurm_count(existing.get("restart_cnt")),
            }
        if spec.disk_from and not (self._dir(key) / "home").exists():  # a clone: its disk is the snapshot's copy
            snapshots = self._disk_snapshots()
            source = snapshots.path(str(spec.disk_from["key"]), str(spec.disk_from["snapshot"]))
            if not source.exists():
                raise PermanentBackendError("The snapshot to clone from is no longer on the cluster.")
            self.root.joinpath(".snapshots").mkdir(mode=0o700, parents=True, exist_ok=True)
            try:
                snapshots.copy_in(key, source)
            except LocalRuntimeError as exc:
                raise PermanentBackendError(str(exc)) from exc
        return self._submit(key, spec, nodes=spec.nodes)

    def start(self, *, key: str, state: dict, node: str, spec: InstanceSpec | None = None) -> dict:
        """Submit a new job on the instance's directory; with a live job, ask it to restart crashed servers."""
        _secrets_refused(spec)
        if not self._dir(key).is_dir():
            raise PermanentBackendError("This machine's disk no longer exists on the cluster.")
        existing = self._active_job(key, self.api.jobs())
        if existing is not None and job_state(existing) != "COMPLETING":
            job_id = slurm_count(existing["job_id"])
            if job_id == state.get("job_id") and not state.get("stopped"):
                restarts = slurm_count(existing.get("restart_cnt"))
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
            gpu_count=int(state["gpu_count"]) if state.get("gpu_count") is not None else 1,
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
        shutil.rmtree(self._snapshots_dir(key), ignore_errors=True)  # its snapshots go with it

    # --- snapshots of the disk (SnapshotsCapability) ------------------------------------------------------

    def _snapshots_dir(self, key: str) -> Path:
        """``ROOT/.snapshots/<key>``: the console's (root, 0700), beside the tenants' folders and out of
        their reach, on the same shared filesystem (a restore is a rename, never a copy across)."""
        self._dir(key)  # the key's checks
        return self.root / ".snapshots" / key

    def _disk_snapshots(self) -> DiskSnapshots:
        return DiskSnapshots(
            disk=lambda key: self._dir(key) / "home",
            mountpoint=lambda key: None,
            root=self.root,
            folder=self._snapshots_dir,
        )

    def snapshot_create(self, *, key: str, state: dict, snapshot: str, progress=None) -> dict:
        """A copy of the instance's ``home`` folder (owners and modes kept). A running job keeps writing
        while it is copied: the copy is what each file held when it was read, as a running machine's
        backup is; stop the instance first for a copy of one moment."""
        if not (self._dir(key) / "home").is_dir():
            raise PermanentBackendError("This machine's disk no longer exists on the cluster.")
        self.root.joinpath(".snapshots").mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            size = self._disk_snapshots().create(key, snapshot, progress)
        except LocalRuntimeError as exc:
            raise PermanentBackendError(str(exc)) from exc
        return {"size_bytes": int(size)}

    def snapshot_restore(self, *, key: str, state: dict, snapshot: str, snapshot_state: dict) -> None:
        """Put the snapshot's copy in place of ``home``: only while no job of the instance runs."""
        if self._active_job(key, self.api.jobs()) is not None:
            raise PermanentBackendError("The machine is running: stop it before restoring a snapshot.")
        try:
            self._disk_snapshots().restore(key, snapshot, progress=None)
        except LocalRuntimeError as exc:
            raise PermanentBackendError(str(exc)) from exc

    def snapshot_delete(self, *, key: str, state: dict, snapshot: str, snapshot_state: dict) -> None:
        self._disk_snapshots().delete(key, snapshot)

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
            failure = "" if state.get("stopped") else self._boot_failure(key, state)
            if failure:
                return Observation(Observed.GONE, stage=BOOT_FAILED, detail=failure)
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
        restarts = slurm_count(job.get("restart_cnt"))
        if status in ("RUNNING", "COMPLETING") and slurm_count(job.get("preempt_time")):
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
        failure = self._boot_failure(key, state)
        if failure:
            return Observation(Observed.PENDING, stage=BOOT_FAILED, detail=failure)
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
        expected = slurm_count(job.get("node_count"), 1)
        if len(reports) < expected:
            return Observation(
                Observed.PENDING, detail=f"Starting: {len(reports)} of {expected} nodes ready", backend_state=new_state
            )
        return Observation(
            Observed.RUNNING,
            backend_state={**new_state, "restarts": restarts},
            fenced=self._fenced(key, state),
            idle_seconds=report_idle_seconds(head),
        )

    def _job(self, key: str, state: dict, jobs: list[dict]) -> dict | None:
        job_id = state.get("job_id")
        for job in jobs:
            if job.get("job_id") == job_id and job_key(job, self.prefix) == key:
                return job
        return self._active_job(key, jobs)

    def machines(self) -> list[MachineInfo]:
        jobs = self.api.jobs()
        machines = {}
        for job in jobs:
            key = job_key(job, self.prefix)
            if key is None or job_state(job) not in ACTIVE:
                continue
            observed = Observed.RUNNING if job_state(job) == "RUNNING" else Observed.PENDING
            if slurm_count(job.get("preempt_time")) and job_state(job) in ("RUNNING", "COMPLETING"):
                observed = Observed.PREEMPTED  # in its grace period
            elif job_state(job) == "PENDING" and slurm_count(job.get("restart_cnt")):
                observed = Observed.PREEMPTED  # requeued, waiting to run again
            _type, per_node = gres_gpus(str(job.get("tres_per_node") or "").removeprefix("gres:").removeprefix("gres/"))
            machines[key] = MachineInfo(
                key=key,
                node=str(job.get("nodes") or ""),
                cards=per_node * slurm_count(job.get("node_count"), 1),
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
                    detail=node_detail(node),
                )
            )
        return infos

    # --- entry points -----------------------------------------------------------------------------------

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

    reads_experiment_runs = True

    def experiment_runs(self, *, key: str, state: dict) -> list[dict]:
        """What the console's hook in the container recorded on the instance's disk, read on the shared
        filesystem as the tenant's data (``wandb_runs``); [] with the process engine, which runs no hook."""
        home = self._dir(key) / "home"
        return wandb_runs_read(home) if home.is_dir() else []

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


def _secrets_refused(spec: InstanceSpec | None) -> None:
    """The job's files on the cluster's shared filesystem would keep the owner's secrets between runs,
    and its processes run outside any container of the image contract: until the job is given them
    on the node alone, a machine with secrets is refused here rather than booted without them."""
    if spec is not None and spec.secrets:
        raise PermanentBackendError("This Slurm cluster cannot give a machine secrets yet: choose none for it.")
