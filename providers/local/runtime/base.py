"""What the two local runtimes share: the process runtime (``supervisor.LocalRuntime``: servers as this
host's processes, also what a Slurm job runs on its node) and the container runtime
(``containers.ContainerRuntime``: each instance a rootful podman container of its image).

``RuntimeBase`` is their contract, as ``providers.base.ProvisioningBackend`` is the providers': an
instance is a directory ``<root>/<key>/`` with its metadata in ``run/meta.json``, every method may be
repeated, a per-instance ``flock`` serialises them across processes, and "already gone" counts as done.
Volumes are directories under ``<root>/volumes/<key>``. What differs (how servers start, stop and are
observed) each runtime implements.
"""

from __future__ import annotations

import abc
import contextlib
import enum
import fcntl
import http.client
import json
import os
import re
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath

from providers.local.runtime.gpus import GpuRegistry
from providers.local.runtime.ports import PortRegistry
from providers.local.runtime.servers import ALL_SERVICES, Paths


class LocalRuntimeError(Exception):
    """A permanent problem with this host's setup (a component not installed, a bad key)."""


class ServerState(enum.StrEnum):
    RUNNING = "running"  # the process is alive and its port accepts connections
    STARTING = "starting"  # alive, not listening yet
    CRASHED = "crashed"  # it was started and is not alive any more (not stopped by us)
    STOPPED = "stopped"  # not started, or stopped by us


@dataclass(frozen=True)
class ServerStatus:
    name: str
    state: ServerState
    port: int | None = None
    pid: int | None = None
    detail: str = ""  # for a crash: the last lines of its log


@dataclass(frozen=True)
class InstanceStatus:
    key: str
    exists: bool
    servers: dict[str, ServerStatus] = field(default_factory=dict)

    @property
    def overall(self) -> str:
        """gone, stopped, starting, running or crashed (any server crashed)."""
        if not self.exists:
            return "gone"
        states = {s.state for s in self.servers.values()}
        if ServerState.CRASHED in states:
            return "crashed"
        if not states or states == {ServerState.STOPPED}:
            return "stopped"
        if states == {ServerState.RUNNING}:
            return "running"
        return "starting"


@dataclass(frozen=True)
class Upstream:
    """Where the proxy sends a user's requests for one server, and the secret it injects."""

    host: str
    port: int
    service: str
    secret: str


@dataclass(frozen=True)
class Mount:
    """A volume the instance sees: ``source`` (a directory on this host) at ``path`` (``/mnt/data``)."""

    source: str
    path: str
    read_only: bool = False

    def target(self, home: Path) -> Path:
        """Where it appears on this host: the mount path under the instance's home."""
        relative = PurePosixPath(self.path).relative_to("/")
        if not relative.parts or any(part in ("", ".", "..") for part in relative.parts):
            raise LocalRuntimeError(f"invalid mount path {self.path!r}")
        return home.joinpath(*relative.parts)

    @property
    def env_name(self) -> str:
        """``/mnt/train`` → ``CONSOLE_VOLUME_MNT_TRAIN``."""
        name = "".join(c if c.isalnum() else "_" for c in self.path.strip("/")).upper()
        return f"CONSOLE_VOLUME_{name}"


def _answers(port: int, path: str, timeout: float = 1.0, host: str = "127.0.0.1") -> bool:
    """The app answers ``GET path`` with a status below 500: it is serving, not just listening
    (vLLM opens its port before the weights are loaded and answers 503 until then)."""
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request("GET", path, headers={"User-Agent": "console-readiness"})
        return connection.getresponse().status < 500
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


def _disk_usage(path: Path) -> int:
    """What ``du -s --bytes``-like accounting of allocated blocks says ``path`` takes, not following links."""
    seen: set[tuple[int, int]] = set()
    total = 0
    stack = [path]
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            total += info.st_blocks * 512
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
    return total


def jupyter_activity(upstream: Upstream, base_url: str) -> tuple[float | None, bool]:
    """JupyterLab's own last activity (a POSIX timestamp; its status endpoint does not touch it) and
    whether a kernel is executing now, asked with its token; (None, False) when it does not answer."""
    headers = {"Authorization": f"token {upstream.secret}", "User-Agent": "console-idle-check"}
    status = _get_json(upstream.port, f"{base_url}api/status", headers)
    kernels = _get_json(upstream.port, f"{base_url}api/kernels", headers) or []
    busy = any(k.get("execution_state") == "busy" for k in kernels if isinstance(k, dict))
    return _timestamp((status or {}).get("last_activity")), busy


def _get_json(port: int, path: str, headers: dict, timeout: float = 2.0):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        return json.loads(response.read()) if response.status == 200 else None
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        connection.close()


def _timestamp(value) -> float | None:
    """An ISO 8601 time from Jupyter ("2026-11-30T06:00:00.123456Z") as a POSIX timestamp."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class RuntimeBase(abc.ABC):
    """An instance's servers on this host, and its volumes: the contract both runtimes keep.

    ``start`` creates the instance (or finds it) and brings up its servers, returning the state to
    persist; ``stop`` ends every process of it and keeps its disk; ``destroy`` deletes it ("already
    gone" is done). ``status``, ``upstream`` and ``idle_seconds`` observe, never change anything.
    """

    engine = "process"
    paths_class: type[Paths] = Paths
    key_pattern = r"[^/]+"  # what an instance key may be, beyond the common rules (a containers' is stricter)

    def __init__(
        self,
        *,
        root: str | os.PathLike,
        services: Sequence[str] = ALL_SERVICES,
        port_low: int = 20000,
        port_high: int = 29999,
        url_prefix: str = "/i/",
        stop_timeout: float = 5.0,
        public_mounts: Mapping[str, str | os.PathLike] | None = None,
        bind: str = "127.0.0.1",
    ) -> None:
        self.root = Path(root)
        self.services = tuple(services)
        self.url_prefix = url_prefix
        self.stop_timeout = stop_timeout
        # Read-only in every instance, as AutoDL mounts its public models and datasets: ``{"/models": dir}``.
        self.public_mounts = {str(path): str(source) for path, source in (public_mounts or {}).items()}
        self.bind = bind  # where the servers listen: loopback, unless a Slurm job serves a remote console
        self.ports = PortRegistry(self.root / "ports.json", low=port_low, high=port_high)
        self.gpus = GpuRegistry(self.root / "gpus.json")

    # --- what is installed ------------------------------------------------------------------------

    @abc.abstractmethod
    def missing_components(self) -> dict[str, str]:
        """``{component: why}`` for what this host lacks to run the configured services; {} when none."""

    @abc.abstractmethod
    def app_missing(self, app: dict) -> str | None:
        """Why ``app`` (``providers.base.AppLaunch`` as a dict) cannot run here, or None."""

    # --- paths, locks, metadata -------------------------------------------------------------------

    def paths(self, key: str) -> Paths:
        if not key or "/" in key or key.startswith(".") or len(key) > 64 or not re.fullmatch(self.key_pattern, key):
            raise LocalRuntimeError(f"invalid instance key {key!r}")
        return self.paths_class(self.root / key)

    @contextlib.contextmanager
    def _lock(self, key: str) -> Iterator[None]:
        lockdir = self.root / ".locks"
        lockdir.mkdir(parents=True, exist_ok=True)
        with open(lockdir / f"{key}.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    def meta(self, key: str) -> dict | None:
        try:
            return json.loads(self.paths(key).meta.read_text())
        except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError):
            return None

    def _save_meta(self, paths: Paths, meta: dict) -> None:
        """Write ``meta.json`` whole or not at all (a reader never sees half of it), readable by root only."""
        tmp = paths.meta.with_suffix(".tmp")
        tmp.write_text(json.dumps(meta, indent=1))
        os.chmod(tmp, 0o600)
        os.replace(tmp, paths.meta)

    def instance_keys(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / "run" / "meta.json").is_file())

    def base_url(self, key: str, service: str) -> str:
        return f"{self.url_prefix}{key}/{service}/"

    # --- the instance's life ----------------------------------------------------------------------

    @abc.abstractmethod
    def start(
        self,
        key: str,
        *,
        owner_ref: str = "",
        gpus: Sequence[str] = (),
        ssh_public_keys: Sequence[str] = (),
        mounts: Sequence[Mount] | None = None,
        app: dict | type[Ellipsis] | None = ...,
    ) -> dict:
        """Create the instance (or find it) and bring up every server that is not running; returns the
        state to persist. ``mounts`` replaces its volumes (None keeps them); ``app`` is the deployment's
        server (None for none, ``...`` to keep the instance's). A runtime may take more keywords."""

    @abc.abstractmethod
    def status(self, key: str) -> InstanceStatus:
        """The instance's servers as they are now (``exists=False`` when it is gone)."""

    @abc.abstractmethod
    def upstream(self, key: str, service: str) -> Upstream | None:
        """Where the proxy reaches ``service`` of a running instance, with the secret to inject; else None."""

    @abc.abstractmethod
    def idle_seconds(self, key: str, *, gpu_busy: bool = False, now: float | None = None) -> int | None:
        """Seconds since a user last did something in the instance (None: unknown), for auto-stop."""

    @abc.abstractmethod
    def stop(self, key: str) -> None:
        """End every process of the instance; its disk and metadata stay. Already stopped is done."""

    @abc.abstractmethod
    def restart(
        self, key: str, *, mounts: Sequence[Mount] | None = None, app: dict | type[Ellipsis] | None = ...
    ) -> dict:
        """Stop and start again with the same ports and GPUs; returns the state to persist."""

    @abc.abstractmethod
    def destroy(self, key: str) -> None:
        """Stop the instance and delete it, its disk included (never a volume's files). Already gone is done."""

    # --- snapshots of the disk (providers.local.runtime.disk_snapshots) ----------------------------

    def disk_path(self, key: str) -> Path:
        """Where ``key``'s disk lives: the process runtime's is its ``home/`` folder."""
        return self.paths(key).home

    def disk_mountpoint(self, key: str) -> Path | None:
        """Where ``key``'s disk is mounted while it runs (None: a plain folder, never mounted)."""
        return None

    def _disk_in_use(self, key: str, meta: dict) -> bool:
        """Whether the instance runs (any server up), so its disk may not be swapped."""
        return self.status(key).overall not in ("stopped", "gone")

    def _disk_snapshots(self):
        from providers.local.runtime.disk_snapshots import DiskSnapshots  # the module imports this one

        return DiskSnapshots(disk=self.disk_path, mountpoint=self.disk_mountpoint, root=self.root)

    def snapshot_create(self, key: str, name: str, progress=None) -> int:
        """Copy ``key``'s disk (running or stopped) to snapshot ``name``; returns its size in bytes."""
        if self.meta(key) is None:
            raise LocalRuntimeError(f"no instance {key!r} on this host")
        with self._lock(key):
            return self._disk_snapshots().create(key, name, progress)

    def snapshot_restore(self, key: str, name: str, progress=None) -> None:
        """Replace stopped ``key``'s disk with snapshot ``name``; a running instance is refused."""
        with self._lock(key):
            meta = self.meta(key)
            if meta is None:
                raise LocalRuntimeError(f"no instance {key!r} on this host")
            if self._disk_in_use(key, meta):
                raise LocalRuntimeError("the instance is running: stop it before restoring a snapshot")
            self._disk_snapshots().restore(key, name, progress)

    def snapshot_delete(self, key: str, name: str) -> None:
        """Remove snapshot ``name`` of ``key``; already gone (the instance too) is done."""
        with self._lock(key):
            self._disk_snapshots().delete(key, name)

    def disk_seed(self, key: str, *, source_key: str, snapshot: str) -> None:
        """Make new instance ``key``'s disk a copy of ``source_key``'s snapshot (a clone), before its first
        start; a disk already there is kept (a repeat)."""
        snapshots = self._disk_snapshots()
        source = snapshots.path(source_key, snapshot)
        if not source.exists():
            raise LocalRuntimeError("the snapshot to clone from is no longer on this host")
        with self._lock(key):
            if not self.disk_path(key).exists():
                self.paths(key).base.mkdir(mode=0o700, parents=True, exist_ok=True)
                snapshots.copy_in(key, source)

    # --- volumes: directories under <root>/volumes ------------------------------------------------

    @property
    def volumes_root(self) -> Path:
        return self.root / "volumes"

    def volume_path(self, key: str) -> Path:
        if not key or "/" in key or key.startswith(".") or len(key) > 64:
            raise LocalRuntimeError(f"invalid volume key {key!r}")
        return self.volumes_root / key

    def volume_create(self, key: str) -> Path:
        """Make volume ``key``'s directory, or find it. Returns its path."""
        path = self.volume_path(key)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def volume_destroy(self, key: str) -> None:
        """Delete volume ``key`` and its files. Already gone counts as done."""
        path = self.volume_path(key)
        if path.is_symlink():  # never ours; do not follow it
            path.unlink()
        shutil.rmtree(path, ignore_errors=True)

    def volume_usage(self, key: str) -> int | None:
        """Bytes volume ``key`` takes on disk (allocated blocks, hard links once); None when it is missing."""
        path = self.volume_path(key)
        if not path.is_dir() or path.is_symlink():
            return None
        return _disk_usage(path)
