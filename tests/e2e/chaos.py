"""The chaos soak's faults: each of `make run`'s processes killed in turn, and the provider gone for a minute.

`make run` (console/run.py) supervises web, the workers, beat and the gateway, and watches its private
PostgreSQL and Redis: each fault here is one a console meets in its first month, and the console must
answer again within ``RECOVERY_S`` of each. The processes are found under the console's own `make`
process, so two consoles running side by side (the e2e tests run two) never touch each other's.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

RECOVERY_S = 30  # after each fault, the console answers again within this
PROVIDER_OUTAGE_S = 60  # how long the provider stays unreachable
FAULTS = ("web", "worker", "beat", "gateway", "redis", "postgres", "provider")


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return []


def _is(role: str, cmdline: list[str]) -> bool:
    line = " ".join(cmdline)
    match role:
        case "web":
            return "uvicorn" in line and "console.asgi:application" in line
        case "worker":
            return " worker" in line and "celery" in line and "-Q" not in cmdline
        case "notify":
            return " worker" in line and "celery" in line and "-Q" in cmdline
        case "beat":
            return "celery" in line and " beat" in line
        case "gateway":
            return "-m gateway" in line
        case "redis":  # Valkey names its process "…/valkey-server 127.0.0.1:<port>"
            return bool(cmdline) and ("valkey-server" in cmdline[0] or "redis-server" in cmdline[0])
        case "postgres":  # the postmaster: the one postgres process whose parent is not a postgres
            return bool(cmdline) and cmdline[0].endswith("postgres") and "-D" in cmdline
    return False


@dataclass
class ConsoleProcesses:
    """The processes of one console started by `make run`, found from its `make` process."""

    make_pid: int

    def all(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.make_pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def role(self, role: str) -> psutil.Process | None:
        """The supervised process of ``role`` (its main process: a child's children are its own)."""
        found = [p for p in self.all() if _is(role, _cmdline(p))]
        pids = {p.pid for p in found}
        main = [p for p in found if p.ppid() not in pids]
        return main[0] if main else None

    def rss(self) -> dict[str, tuple[int, int]]:
        """Resident memory of each role's main process now: ``{role: (pid, bytes)}``."""
        sizes = {}
        for role in ("web", "worker", "notify", "beat", "gateway", "redis"):
            process = self.role(role)
            if process is not None:
                try:
                    sizes[role] = (process.pid, process.memory_info().rss)
                except psutil.NoSuchProcess:
                    continue
        return sizes


def answers(url: str, token: str) -> bool:
    """The console serves an authenticated API call that reads the database."""
    try:
        response = httpx.get(
            f"{url}api/v1/instances/?page_size=1", headers={"Authorization": f"Bearer {token}"}, timeout=10
        )
    except httpx.TransportError:
        return False
    return response.status_code == 200


@dataclass
class FaultRecord:
    fault: str
    at_s: float  # seconds into the soak
    recovered_s: float | None  # seconds from the fault until the console answered again; None: it did not


@dataclass
class Chaos:
    """Injects ``FAULTS`` one after the other, ``every_s`` apart, while the soak's clients run."""

    url: str
    token: str
    processes: ConsoleProcesses
    unreachable_switch: Path  # the simulated cloud's UNREACHABLE_FILE
    every_s: float
    warm_up_s: float
    records: list[FaultRecord] = field(default_factory=list)
    rss_first: dict[int, tuple[str, int]] = field(default_factory=dict)  # pid -> (role, bytes) after warm-up
    rss_last: dict[int, tuple[str, int]] = field(default_factory=dict)
    rss_seen_at: dict[int, float] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)
    errors: list[str] = field(default_factory=list)

    def _sample_memory(self, started: float) -> None:
        """Each process's resident memory: its first sample at least ``warm_up_s`` after it was first seen
        (so a restarted process warms up too), and its latest."""
        now = time.monotonic()
        for role, (pid, rss) in self.processes.rss().items():
            seen = self.rss_seen_at.setdefault(pid, now)
            if now - seen >= self.warm_up_s and now - started >= self.warm_up_s:
                self.rss_first.setdefault(pid, (role, rss))
                self.rss_last[pid] = (role, rss)

    def _kill(self, role: str) -> None:
        process = self.processes.role(role)
        if process is None:
            raise AssertionError(f"no {role} process under the console")
        process.send_signal(signal.SIGKILL)

    def _recover(self, fault: str, at: float, started: float, wait: Callable[[], None] = lambda: None) -> None:
        wait()
        deadline = time.monotonic() + RECOVERY_S
        while time.monotonic() < deadline:
            if answers(self.url, self.token):
                self.records.append(FaultRecord(fault, round(at - started, 1), round(time.monotonic() - at, 1)))
                return
            time.sleep(0.5)
        self.records.append(FaultRecord(fault, round(at - started, 1), None))

    def run(self, faults: tuple[str, ...] = FAULTS) -> None:
        """In a thread: warm up, then one fault every ``every_s`` (memory sampled throughout)."""
        started = time.monotonic()
        try:
            next_fault = started + self.warm_up_s
            queue = list(faults)
            while not self.stop.is_set():
                self._sample_memory(started)
                if queue and time.monotonic() >= next_fault:
                    fault, at = queue.pop(0), time.monotonic()
                    if fault == "provider":
                        self.unreachable_switch.parent.mkdir(parents=True, exist_ok=True)
                        self.unreachable_switch.touch()
                        try:
                            self._recover(fault, at, started)  # the console answers while its cloud does not
                            self.stop.wait(max(0.0, PROVIDER_OUTAGE_S - (time.monotonic() - at)))
                        finally:
                            self.unreachable_switch.unlink(missing_ok=True)
                    else:
                        self._kill(fault)
                        self._recover(fault, at, started)
                    next_fault = time.monotonic() + self.every_s
                self.stop.wait(2)
        except Exception as exc:  # reported by the test, which asserts there were none
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            self.unreachable_switch.unlink(missing_ok=True)

    def memory_growth(self) -> dict[str, float]:
        """The largest growth of resident memory per role, as a ratio, over processes sampled twice."""
        growth: dict[str, float] = {}
        for pid, (role, first) in self.rss_first.items():
            last = self.rss_last.get(pid, (role, first))[1]
            growth[role] = max(growth.get(role, 0.0), round(last / first, 3))
        return growth
