"""Port allocation on 127.0.0.1: a file-backed registry, so two instances never share a port.

Each allocation is recorded in one JSON file under an exclusive ``flock``; a candidate port is taken
only when no record holds it AND a bind test on 127.0.0.1 succeeds, so ports in use by anything else
on the host are skipped too. The lock makes this safe across processes (web, several Celery workers).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import socket
from collections.abc import Iterator
from pathlib import Path


class NoFreePort(Exception):
    pass


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # No SO_REUSEADDR: a port in TIME_WAIT from a just-stopped server counts as taken, which keeps
        # a new instance from getting connections meant for the old one.
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


class LockedJsonFile:
    """A JSON document that one process at a time reads and rewrites (``flock`` on a side file)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                data = json.loads(self.path.read_text()) if self.path.exists() else {}
            except json.JSONDecodeError:
                data = {}
            before = json.dumps(data, sort_keys=True)
            yield data
            if json.dumps(data, sort_keys=True) != before:
                tmp = self.path.with_suffix(".tmp")
                tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
                os.replace(tmp, self.path)


class PortRegistry(LockedJsonFile):
    """``{key: {service: port}}`` in ``path``; ``allocate`` and ``release`` are idempotent."""

    def __init__(self, path: Path, *, low: int = 20000, high: int = 29999) -> None:
        super().__init__(path)
        self.low, self.high = low, high

    def allocate(self, key: str, services: list[str]) -> dict[str, int]:
        """Ports for ``services`` of ``key``: the recorded ones, plus fresh ones for the rest."""
        with self._locked() as data:
            mine = data.setdefault(key, {})
            taken = {port for ports in data.values() for port in ports.values()}
            candidates = list(range(self.low, self.high + 1))
            random.shuffle(candidates)  # spreads instances out; less reuse of just-freed ports
            pool = iter(candidates)
            for service in services:
                if service in mine:
                    continue
                for port in pool:
                    if port not in taken and port_is_free(port):
                        mine[service] = port
                        taken.add(port)
                        break
                else:
                    raise NoFreePort(f"no free port in {self.low}-{self.high}")
            return {service: mine[service] for service in services}

    def get(self, key: str) -> dict[str, int]:
        with self._locked() as data:
            return dict(data.get(key, {}))

    def release(self, key: str) -> None:
        with self._locked() as data:
            data.pop(key, None)

    def all(self) -> dict[str, dict[str, int]]:
        with self._locked() as data:
            return {key: dict(ports) for key, ports in data.items()}
