"""The local runtime: start, stop, observe and destroy one instance's user servers on this host.

An instance is a directory under ``root`` (``<key>/home`` is its disk, kept on stop and deleted on
destroy; ``<key>/run`` holds its secrets, configs, pid files and logs) plus up to three processes,
each in its own session (process group). Every method may be repeated and may be called from any
process (web, several Celery workers): a per-instance ``flock`` serialises them, pid files record
(pid, start time) so a reused pid is never mistaken for our server, and the port registry
(``ports.PortRegistry``) keeps two instances from sharing a port.

Stopping kills every process that belongs to the instance: the servers' process trees (collected
before the first signal, so grandchildren in sessions of their own, like Jupyter kernels and
terminals, are found) and every process that carries the instance's marker in its environment
(``CONSOLE_INSTANCE_KEY``), which catches a user's ``nohup … &`` that outlived its parent.

Isolation: all instances run as the runtime's own Unix account. The proxy keeps users apart over
HTTP, but code inside one instance can read another's files; the local backend is for a
single-tenant host (a workstation, a lab's box, CI), like JupyterHub's spawner without system users.
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import http.client
import json
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from instances.local import servers
from instances.local.gpus import GpuRegistry
from instances.local.ports import PortRegistry
from instances.local.servers import APP, CODE, LAB, SSH, WEBUI, Paths

MARKER = "CONSOLE_INSTANCE_KEY"
STATE_VERSION = 1


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


def _default_jupyter() -> str:
    return str(Path(__file__).resolve().parents[2] / "var/local-deps/jupyter/bin/jupyter")


def _default_code_server() -> str:
    return str(
        Path(__file__).resolve().parents[2] / "var/local-deps/code-server/node_modules/code-server/out/node/entry.js"
    )


class LocalRuntime:
    def __init__(
        self,
        *,
        root: str | os.PathLike,
        jupyter_bin: str = "",
        code_server_entry: str = "",
        node_bin: str = "node",
        sshd_bin: str = "",
        ssh_keygen_bin: str = "ssh-keygen",
        sftp_server: str = "/usr/lib/openssh/sftp-server",
        services: Sequence[str] = servers.ALL_SERVICES,
        port_low: int = 20000,
        port_high: int = 29999,
        url_prefix: str = "/i/",
        stop_timeout: float = 5.0,
        bind: str = "127.0.0.1",
    ) -> None:
        self.root = Path(root)
        self.jupyter_bin = jupyter_bin or _default_jupyter()
        self.code_server_entry = code_server_entry or _default_code_server()
        self.node_bin = node_bin
        self.sshd_bin = sshd_bin or shutil.which("sshd") or "/usr/sbin/sshd"
        self.ssh_keygen_bin = ssh_keygen_bin
        self.sftp_server = sftp_server
        self.services = tuple(services)
        self.url_prefix = url_prefix
        self.stop_timeout = stop_timeout
        self.bind = bind  # where the servers listen: loopback, unless a Slurm job serves a remote console
        self.ports = PortRegistry(self.root / "ports.json", low=port_low, high=port_high)
        self.gpus = GpuRegistry(self.root / "gpus.json")

    # --- what is installed ------------------------------------------------------------------------

    def missing_components(self) -> dict[str, str]:
        """``{service: why}`` for the configured services this host cannot run (not installed)."""
        missing = {}
        if LAB in self.services and not os.access(self.jupyter_bin, os.X_OK):
            missing[LAB] = f"JupyterLab not found at {self.jupyter_bin} (run `make local-deps`)"
        if CODE in self.services and not (Path(self.code_server_entry).is_file() and shutil.which(self.node_bin)):
            missing[CODE] = f"code-server not found at {self.code_server_entry} (run `make local-deps`)"
        if SSH in self.services and not os.access(self.sshd_bin, os.X_OK):
            missing[SSH] = f"sshd not found at {self.sshd_bin} (run `make local-deps`)"
        return missing

    def instance_path(self) -> str:
        """The PATH an instance's processes get: the local-deps environment first, then the system's."""
        return f"{Path(self.jupyter_bin).parent}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

    def app_missing(self, app: dict) -> str | None:
        """Why this host cannot run ``app``'s command (its program is not installed), or None."""
        for part in (app, app.get("webui")):
            if not part:
                continue
            program = servers.app_program(part.get("argv") or ())
            if not program:
                return f"the app {app.get('name', '')!r} has no start command"
            if shutil.which(program, path=self.instance_path()) is None:
                return f"{program} is not installed on this host, so {app.get('name', 'the app')} cannot run here"
        return None

    # --- paths, locks, metadata -------------------------------------------------------------------

    def paths(self, key: str) -> Paths:
        if not key or "/" in key or key.startswith(".") or len(key) > 64:
            raise LocalRuntimeError(f"invalid instance key {key!r}")
        return Paths(self.root / key)

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
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def instance_keys(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / "run" / "meta.json").is_file())

    def base_url(self, key: str, service: str) -> str:
        return f"{self.url_prefix}{key}/{service}/"

    # --- start ------------------------------------------------------------------------------------

    def start(
        self,
        key: str,
        *,
        owner_ref: str = "",
        gpus: Sequence[str] = (),
        ssh_public_keys: Sequence[str] = (),
        volumes: Mapping[str, str] | None = None,
        app: dict | type[Ellipsis] | None = ...,
    ) -> dict:
        """Create the instance (or find it) and bring up every server that is not running.

        ``app`` is the deployment's server (``backends.AppLaunch`` as a dict), None for none, or ``...``
        to keep what the instance had. Returns the state to persist: ``{"version", "ports", "dir",
        "login_user"}``. Servers that are alive are left alone, so a repeat starts nothing; a crashed
        one is started again.
        """
        missing = self.missing_components()
        if missing:
            raise LocalRuntimeError("; ".join(missing.values()))
        if app and app is not ...:
            reason = self.app_missing(app)
            if reason:
                raise LocalRuntimeError(reason)
        paths = self.paths(key)
        with self._lock(key):
            meta = self._write_meta(
                key,
                paths,
                owner_ref=owner_ref,
                gpus=gpus,
                ssh_public_keys=ssh_public_keys,
                volumes=volumes or {},
                app=app,
            )
            services = self.services_of(meta)
            ports = self.ports.allocate(key, list(services))
            env = self._environment(key, paths, meta)
            for service in services:
                if self._alive(paths, service) is not None:
                    continue
                command = self._command(key, service, paths, ports[service], meta, env)
                self._spawn(paths, command, env)
            return {"version": STATE_VERSION, "ports": ports, "dir": str(paths.base), "login_user": meta["login_user"]}

    def services_of(self, meta: dict | None) -> tuple[str, ...]:
        """The servers this instance runs: the configured entry points, plus its app if it has one."""
        app = (meta or {}).get("app") or {}
        return self.services + ((APP,) if app else ()) + ((WEBUI,) if app.get("webui") else ())

    def _write_meta(self, key, paths, *, owner_ref, gpus, ssh_public_keys, volumes, app=...) -> dict:
        paths.home.mkdir(parents=True, exist_ok=True)
        paths.run.mkdir(parents=True, exist_ok=True)
        os.chmod(paths.run, 0o700)
        meta = self.meta(key) or {
            "key": key,
            "created": time.time(),
            # One secret per server, made once: kept across stop/start so open tabs keep working.
            "secrets": {LAB: secrets.token_urlsafe(32), CODE: secrets.token_hex(32)},
        }
        meta["secrets"].setdefault(APP, secrets.token_urlsafe(32))
        if app is not ...:
            meta["app"] = dict(app) if app else None
        meta.update(
            owner_ref=owner_ref or meta.get("owner_ref", ""),
            gpus=[str(g) for g in gpus],
            ssh_public_keys=list(ssh_public_keys),
            volumes=dict(volumes),
            login_user=servers.sshd_login_user(),
        )
        tmp = paths.meta.with_suffix(".tmp")
        tmp.write_text(json.dumps(meta, indent=1))
        os.chmod(tmp, 0o600)
        os.replace(tmp, paths.meta)
        volume_dir = paths.home / "volumes"
        for name, target in meta["volumes"].items():
            volume_dir.mkdir(exist_ok=True)
            link = volume_dir / name
            if not link.is_symlink():
                link.symlink_to(target)
        host_key = paths.run / "ssh_host_ed25519_key"
        if SSH in self.services and not host_key.exists():
            subprocess.run(  # noqa: S603
                [self.ssh_keygen_bin, "-q", "-t", "ed25519", "-N", "", "-C", f"instance-{key}", "-f", str(host_key)],
                check=True,
                capture_output=True,
            )
        return meta

    def _environment(self, key: str, paths: Paths, meta: dict) -> dict[str, str]:
        # A clean environment: the console's own (database URL, secret key…) never reaches a user.
        env = {
            "PATH": self.instance_path(),
            "HOME": str(paths.home),
            "USER": meta["login_user"],
            "LOGNAME": meta["login_user"],
            "SHELL": os.environ.get("SHELL", "/bin/bash"),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "TERM": "xterm-256color",
            "CUDA_VISIBLE_DEVICES": ",".join(meta["gpus"]),
            MARKER: key,
        }
        for name, target in sorted(meta["volumes"].items()):
            env[f"CONSOLE_VOLUME_{name.upper().replace('-', '_')}"] = target
        return env

    def _command(self, key, service, paths, port, meta, env) -> servers.ServerCommand:
        if service == LAB:
            for path, text in servers.jupyter_files(paths=paths).items():
                path.write_text(text)
                os.chmod(path, 0o600)
            return servers.jupyter_command(
                paths=paths,
                port=port,
                base_url=self.base_url(key, LAB),
                token=meta["secrets"][LAB],
                jupyter_bin=self.jupyter_bin,
                bind=self.bind,
            )
        if service == CODE:
            return servers.code_server_command(
                paths=paths,
                port=port,
                secret=meta["secrets"][CODE],
                code_server_entry=self.code_server_entry,
                node_bin=shutil.which(self.node_bin) or self.node_bin,
                bind=self.bind,
            )
        if service == SSH:
            Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege-separation directory
            session_env = {k: v for k, v in env.items() if k not in {"PATH", "USER", "LOGNAME", "SHELL", "TERM"}}
            for path, text in servers.sshd_files(
                paths=paths,
                port=port,
                authorized_keys=meta["ssh_public_keys"],
                env=session_env,
                sftp_server=self.sftp_server,
                bind=self.bind,
            ).items():
                path.write_text(text)
                os.chmod(path, 0o700 if path.name == "ssh-session" else 0o600)
            return servers.sshd_command(paths=paths, sshd_bin=self.sshd_bin)
        if service in (APP, WEBUI):
            ports = self.ports.get(key)
            app = meta["app"]
            return servers.app_command(
                paths=paths,
                port=ports[APP],
                webui_port=ports.get(WEBUI),
                base_path=self.base_url(key, service),
                app=app if service == APP else app["webui"],
                secret=meta["secrets"][APP],
                name=service,
                host=self.bind,
            )
        raise LocalRuntimeError(f"unknown service {service!r}")

    def _spawn(self, paths: Paths, command: servers.ServerCommand, env: dict[str, str]) -> None:
        log = open(paths.log(command.name), "ab")  # noqa: SIM115 (handed to the child)
        try:
            process = subprocess.Popen(  # noqa: S603
                command.argv,
                cwd=command.cwd or str(paths.home),
                env={**env, **command.env},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        finally:
            log.close()
        create_time = psutil.Process(process.pid).create_time()
        paths.pidfile(command.name).write_text(json.dumps({"pid": process.pid, "create_time": create_time}))

    # --- observe ----------------------------------------------------------------------------------

    def _alive(self, paths: Paths, service: str) -> psutil.Process | None:
        """The server's process when it is alive, else None (reaping it if it is our zombie)."""
        try:
            record = json.loads(paths.pidfile(service).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        try:
            process = psutil.Process(record["pid"])
            if abs(process.create_time() - record["create_time"]) > 0.05:
                return None  # the pid was reused by another program
            if process.status() == psutil.STATUS_ZOMBIE:
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(record["pid"], os.WNOHANG)
                return None
            return process
        except psutil.NoSuchProcess:
            return None

    def status(self, key: str) -> InstanceStatus:
        paths = self.paths(key)
        if not paths.meta.exists():
            return InstanceStatus(key=key, exists=False)
        ports = self.ports.get(key)
        meta = self.meta(key)
        result = {}
        for service in self.services_of(meta):
            port = ports.get(service)
            process = self._alive(paths, service)
            if process is not None:
                listening = port is not None and _listens(process, port)
                if listening and service in (APP, WEBUI):
                    listening = _answers(port, self._app_probe_path(key, meta, service))
                state = ServerState.RUNNING if listening else ServerState.STARTING
                result[service] = ServerStatus(service, state, port, process.pid)
            elif paths.pidfile(service).exists():
                result[service] = ServerStatus(service, ServerState.CRASHED, port, None, _tail(paths.log(service)))
            else:
                result[service] = ServerStatus(service, ServerState.STOPPED, port)
        return InstanceStatus(key=key, exists=True, servers=result)

    def _app_probe_path(self, key: str, meta: dict, service: str = APP) -> str:
        app = meta.get("app") or {}
        if service == WEBUI:
            app = app.get("webui") or {}
        base = self.base_url(key, service).rstrip("/") if app.get("serves_base_path", True) else ""
        return base + (app.get("health_path") or "/")

    def upstream(self, key: str, service: str) -> Upstream | None:
        """Where the proxy reaches ``service`` of ``key``; None when it is not configured or has no port."""
        meta = self.meta(key)
        port = self.ports.get(key).get(service) if meta else None
        if not meta or port is None or service not in (LAB, CODE, APP, WEBUI):
            return None
        return Upstream(
            host="127.0.0.1" if self.bind in ("0.0.0.0", "::") else self.bind,  # noqa: S104 (a comparison)
            port=port,
            service=service,
            secret=meta["secrets"][APP if service == WEBUI else service],
        )

    def processes(self, key: str) -> list[psutil.Process]:
        """Every live process of the instance: server trees and anything carrying its marker."""
        paths = self.paths(key)
        found: dict[int, psutil.Process] = {}
        for service in servers.KNOWN_SERVICES:
            process = self._alive(paths, service)
            if process is None:
                continue
            found[process.pid] = process
            with contextlib.suppress(psutil.Error):
                for child in process.children(recursive=True):
                    found[child.pid] = child
        for process in psutil.process_iter():
            if process.pid in found or process.pid == os.getpid():
                continue
            with contextlib.suppress(psutil.Error):
                if process.environ().get(MARKER) == key and process.status() != psutil.STATUS_ZOMBIE:
                    found[process.pid] = process
        return list(found.values())

    # --- stop and destroy -------------------------------------------------------------------------

    def stop(self, key: str) -> None:
        """Kill every process of the instance and free its ports and GPUs; its disk and secrets stay."""
        paths = self.paths(key)
        with self._lock(key):
            self._kill(key)
            for service in servers.KNOWN_SERVICES:
                paths.pidfile(service).unlink(missing_ok=True)
            self.ports.release(key)
            self.gpus.release(key)

    def restart(self, key: str, *, app: dict | type[Ellipsis] | None = ...) -> dict:
        """Kill the instance's processes and start its servers again, keeping its ports and GPUs.

        ``app``: the app to run from now on (None: none), or ``...`` to keep the instance's."""
        paths = self.paths(key)
        meta = self.meta(key)
        if meta is None:
            raise LocalRuntimeError(f"no instance {key!r} on this host")
        with self._lock(key):
            self._kill(key)
            for service in servers.KNOWN_SERVICES:
                paths.pidfile(service).unlink(missing_ok=True)
        return self.start(
            key,
            owner_ref=meta.get("owner_ref", ""),
            gpus=meta.get("gpus", []),
            ssh_public_keys=meta.get("ssh_public_keys", []),
            volumes=meta.get("volumes", {}),
            app=app,
        )

    def destroy(self, key: str) -> None:
        """Stop the instance and delete its directory. Already gone counts as done."""
        paths = self.paths(key)
        with self._lock(key):
            self._kill(key)
            self.ports.release(key)
            self.gpus.release(key)
            shutil.rmtree(paths.base, ignore_errors=True)
        (self.root / ".locks" / f"{key}.lock").unlink(missing_ok=True)

    def _kill(self, key: str) -> None:
        targets = self.processes(key)
        if not targets:
            return
        for process in targets:
            with contextlib.suppress(psutil.Error):
                process.terminate()
        _gone, alive = psutil.wait_procs(targets, timeout=self.stop_timeout)
        for process in alive:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(alive, timeout=self.stop_timeout)
        # Anything started while we were signalling (a kernel being launched) gets the same.
        late = self.processes(key)
        for process in late:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(late, timeout=self.stop_timeout)


def _listens(process: psutil.Process, port: int) -> bool:
    """The server (or a child: code-server serves from one) listens on ``port``.

    Read from the kernel's socket table rather than by connecting, which would make sshd fork a
    pre-auth child and log a dropped connection at every poll."""
    try:
        family = [process, *process.children(recursive=True)]
    except psutil.Error:
        return False
    for member in family:
        try:
            for conn in member.net_connections(kind="tcp"):
                if conn.status == psutil.CONN_LISTEN and conn.laddr.port == port:
                    return True
        except psutil.Error:
            continue
    return False


def _answers(port: int, path: str, timeout: float = 1.0) -> bool:
    """The app answers ``GET path`` with a status below 500: it is serving, not just listening
    (vLLM opens its port before the weights are loaded and answers 503 until then)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", path, headers={"User-Agent": "console-readiness"})
        return connection.getresponse().status < 500
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


def _tail(path: Path, lines: int = 5, limit: int = 2000) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - limit))
            text = handle.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])
