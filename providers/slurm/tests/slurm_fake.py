"""The Slurm backend's tests without a cluster: fakes behind its two seams (``SlurmBackend.api``, the
transport, and ``SlurmBackend.tenants``, the host's users).

``FakeCli`` is the command-line transport with the tools answered in memory (what ``sbatch`` was
asked, and the script it got); ``cli_backend`` is a backend on it, for tests of what is submitted.

``FakeSlurm`` is an in-process Slurm for the backend's contract.

It keeps a queue as squeue reports one (``job_state``, ``nodes``, ``node_count``, ``tres_per_node``)
and plays the job's part on the shared filesystem: ``advance()`` runs every pending job on a node
and writes each node's report, as ``providers.slurm.job`` does. Levers: ``crash(key)`` makes a
running job report a dead server (DEGRADED) until the console asks for a repair; ``down`` makes
every call fail as an unreachable controller does.
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

from providers import InstanceSpec, TransientBackendError
from providers.base import Tenant
from providers.slurm.backend import SlurmBackend
from providers.slurm.cli import SlurmCli
from providers.slurm.job import claim_write, report_path

ACTIVE = ("PENDING", "RUNNING")
# A tenant as the console allocates one (``instances.tenancy``), far above any system user.
TENANT = Tenant("gpuc-t9001", 79001, 1 << 30, 65536)


class FakeTenantAccounts:
    """The host's users, as the backend sees them (``SlurmBackend.tenants``): every tenant exists, and
    a directory handed over keeps its owner (a test need not run as root)."""

    def __init__(self) -> None:
        self.ensured: list = []
        self.handed: dict[Path, object] = {}

    def ensure(self, tenant) -> None:
        self.ensured.append(tenant)

    @staticmethod
    def owns(path: Path, uid: int) -> bool:
        """Files the fake's jobs write are the test's own user's: they count as the tenant's."""
        return Path(path).stat().st_uid == os.getuid()

    def hand_over(self, path: Path, tenant, *, mode: int = 0o700) -> None:
        self.handed[Path(path)] = tenant
        Path(path).chmod(mode)


class FakeSlurm:
    def __init__(
        self, *, prefix: str = "console-", nodes: tuple[str, ...] = ("gpu01", "gpu02"), cards: int = 8
    ) -> None:
        self.prefix = prefix
        self.node_names = nodes
        self.cards = cards
        self.queue: list[dict] = []
        self.down = False
        self.crashed: set[str] = set()  # keys whose head reports a dead server
        self.repairs_seen: dict[str, str] = {}
        # What each node of a key's job samples of its cards (job.sample_gpus): key -> one list per rank.
        self.gpu_samples: dict[str, list[list[dict]]] = {}
        self.gpu_sampled_at: float | None = None  # None: now
        self._ids = itertools.count(1000)

    def _reachable(self) -> None:
        if self.down:
            raise TransientBackendError("slurmrestd did not answer: connection refused")

    # --- the transport ---------------------------------------------------------------------------

    def submit(self, *, script: str, job: dict) -> int:
        self._reachable()
        job_id = next(self._ids)
        gres = job["gres"]  # gpu:TYPE:N or gpu:N; empty for a run without GPU
        self.queue.append(
            {
                "job_id": job_id,
                "name": job["name"],
                "job_state": "PENDING",
                "state_reason": "None",
                "partition": job.get("partition") or "gpu",
                "priority": 1,
                "submit_time": int(time.time()),
                "nodes": "",
                "node_count": job["nodes"],
                "tres_per_node": f"gres:{gres}" if gres else "",
                "cwd": job["cwd"],
            }
        )
        return job_id

    def jobs(self) -> list[dict]:
        self._reachable()
        return [dict(j) for j in self.queue]

    def cancel(self, job_id: int, *, user: str = "") -> None:
        self._reachable()
        for job in self.queue:
            if job["job_id"] == job_id and job["job_state"] in ACTIVE:
                job["job_state"] = "CANCELLED"

    def nodes(self) -> list[dict]:
        self._reachable()
        return [
            {
                "name": n,
                "address": "127.0.0.1",  # every fake node is this host, as on the test cluster
                "hostname": "localhost",
                "gres": f"gpu:h200:{self.cards}",
                "gres_used": "gpu:h200:0",
                "state": "idle",
            }
            for n in self.node_names
        ]

    # --- the cluster's side ----------------------------------------------------------------------

    def advance(self) -> None:
        """Slurm starts what is queued; each running job's head reports, as the job program does."""
        for job in self.queue:
            key = job["name"].removeprefix(self.prefix)
            if job["job_state"] == "PENDING":
                job["job_state"] = "RUNNING"
                job["nodes"] = ",".join(self.node_names[: job["node_count"]])
            if job["job_state"] != "RUNNING":
                continue
            run = Path(job["cwd"]).parent / "run"
            repair = (run / "slurm-repair").read_text() if (run / "slurm-repair").exists() else ""
            if repair != self.repairs_seen.get(key, ""):  # the console asked for a repair: done
                self.repairs_seen[key] = repair
                self.crashed.discard(key)
            for rank, node in enumerate(job["nodes"].split(",")):
                crashed = rank == 0 and key in self.crashed
                claim_write(
                    report_path(run, rank),
                    {
                        "v": 1,
                        "key": key,
                        "job_id": str(job["job_id"]),
                        "rank": rank,
                        "node": node,
                        "host": "127.0.0.1",
                        "gpus": ["0"],
                        "state": "degraded" if crashed else "running",
                        "detail": "app stopped unexpectedly" if crashed else "",
                        "ports": {},
                        "login_user": "",
                        "at": time.time(),
                        **self._gpu(key, rank),
                    },
                )

    def _gpu(self, key: str, rank: int) -> dict:
        per_rank = self.gpu_samples.get(key) or []
        if rank >= len(per_rank):
            return {"gpu_samples": [], "gpu_at": None}
        return {"gpu_samples": per_rank[rank], "gpu_at": self.gpu_sampled_at or time.time()}

    def crash(self, key: str) -> None:
        self.crashed.add(key)


class FakeCli(SlurmCli):
    """The command-line transport with the tools answered in memory: every call's arguments (``calls``)
    and input (``scripts``: the batch script, for ``sbatch``) are kept; ``sbatch`` answers job 42 and
    ``squeue`` answers ``queue`` (jobs as Slurm 22.05's ``squeue --json`` lists them)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, ...]] = []
        self.scripts: list[str] = []
        self.queue: list[dict] = []

    def _run(self, tool: str, *args: str, stdin: str | None = None) -> str:
        self.calls.append((tool, *args))
        self.scripts.append(stdin or "")
        return "42\n" if tool == "sbatch" else ""

    def jobs(self) -> list[dict]:
        return self.queue


def cli_backend(tmp_path, **options) -> tuple[SlurmBackend, FakeCli]:
    """A Slurm backend on ``FakeCli``, its instances under ``tmp_path``, no servers, with ``options``."""
    backend = SlurmBackend(alias="slurm", options={"ROOT": str(tmp_path), "SERVICES": [], **options})
    backend.api = cli = FakeCli()
    backend.tenants = FakeTenantAccounts()
    return backend, cli


def spec(**kwargs) -> InstanceSpec:
    """A machine of 8 H200 cards for ``TENANT`` (any field overridden by ``kwargs``)."""
    return InstanceSpec(
        **{"node": "", "gpu_model": "h200", "gpu_count": 8, "image": "x", "disk_gb": 20, "tenant": TENANT, **kwargs}
    )
