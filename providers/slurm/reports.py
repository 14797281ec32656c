"""The job's reports, and what the console believes of them.

A Slurm job runs as its tenant's own user, so every report it writes into the instance's directory
(``run/slurm-report-<rank>.json``, ``providers.slurm.job``) is the tenant's claim. This half of the
backend reads them, checks each against what the tenant does not control (``JobReports._refusal``:
the threat model), keeps a copy signed with the console's own key for the proxy and the gateway
(``_verified_write``, ``_head``), and reads the GPU samples and the fencing records the job wrote.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from providers.base import GpuProcess, GpuSample, InstanceSpec
from providers.slurm.job import ACTIVITY_CHECK_S, claim_read, report_read, report_write
from providers.slurm.records import hostlist_expand

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


def _int(value) -> int | None:
    """A figure of the job's report (its own JSON, not Slurm's): a number, or ``None`` when it has none."""
    return None if value is None else int(value)


# Reports the console refused (forged, or pointing outside the job's allocation): a security event.
security_log = logging.getLogger("console.security.slurm")


def _refused(key: str, job_id: str, why: str) -> None:
    security_log.warning("Refused a Slurm job report of instance %s (job %s): %s", key, job_id, why)


def _host_allowed(host: str, allowed: set[str]) -> bool:
    """``host`` is one of ``allowed``, or a fully qualified name of one (gpu01.cluster for gpu01)."""
    return bool(host) and any(host == name or host.startswith(f"{name}.") for name in allowed if name)


class JobReports:
    """The report-reading half of ``SlurmBackend`` (a mixin: it uses the backend's ``options``,
    ``root``, ``services``, ``tenants``, ``api``, ``_dir`` and ``report_secret``)."""

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


def report_idle_seconds(report: dict, *, now: float | None = None) -> int | None:
    """How long nobody has used the run, from its head's report (``active_at``, what the job's runtime
    last saw); None when the report does not say, or is too old to be the job's current word (a job
    rewrites it every ``ACTIVITY_CHECK_S``): an instance is then unknown, never idle."""
    active_at, at = report.get("active_at"), report.get("at")
    if not isinstance(active_at, int | float) or not isinstance(at, int | float):
        return None
    now = time.time() if now is None else now
    if now - at > 4 * ACTIVITY_CHECK_S:
        return None
    return max(0, int(now - active_at))
