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

Volumes are directories under ``<root>/volumes/<key>``. Instances share the host's filesystem, so a
volume "mounted at /mnt/data" appears at ``<home>/mnt/data`` (and in ``$CONSOLE_VOLUME_MNT_DATA``):
a symlink to the volume for a read-write mount; for a read-only one, a read-only bind mount of it
when the runtime may mount (it runs as root), so a write through that path fails with EROFS for
every process, root included. Without that privilege a read-only mount is a symlink too and is not
enforced (``Mount state`` says so). Either way it guards the path the instance was given, not the
volume's directory itself, which any process of the runtime's account can still reach by its host
path: the same single-tenant caveat as above. Mounts are set up at every start (the current list,
``mounts``), torn down at stop, and unmounted before an instance's directory is deleted, so a
release never deletes a volume's files.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

import psutil

from providers.local.runtime import servers
from providers.local.runtime.base import (
    InstanceStatus,
    LocalRuntimeError,
    Mount,
    RuntimeBase,
    ServerState,
    ServerStatus,
    Upstream,
    _answers,
    jupyter_activity,
)
from providers.local.runtime.servers import APP, CODE, LAB, SSH, WEBUI, Paths

MARKER = "CONSOLE_INSTANCE_KEY"
STATE_VERSION = 1


# The checkout: `make local-deps` installs the user servers under its var/local-deps/.
PROJECT_ROOT = Path(__file__).resolve().parents[3]


def _default_jupyter() -> str:
    return str(PROJECT_ROOT / "var/local-deps/jupyter/bin/jupyter")


def _default_code_server() -> str:
    return str(PROJECT_ROOT / "var/local-deps/code-server/node_modules/code-server/out/node/entry.js")


class LocalRuntime(RuntimeBase):
    """Instances as this host's processes (see the module's docstring), as a Slurm job runs them too."""

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
        public_mounts: Mapping[str, str | os.PathLike] | None = None,
        bind: str = "127.0.0.1",
    ) -> None:
        super().__init__(
            root=root,
            services=services,
            port_low=port_low,
            port_high=port_high,
            url_prefix=url_prefix,
            stop_timeout=stop_timeout,
            public_mounts=public_mounts,
            bind=bind,
        )
        self.jupyter_bin = jupyter_bin or _default_jupyter()
        self.code_server_entry = code_server_entry or _default_code_server()
        self.node_bin = node_bin
        self.sshd_bin = sshd_bin or shutil.which("sshd") or "/usr/sbin/sshd"
        self.ssh_keygen_bin = ssh_keygen_bin
        self.sftp_server = sftp_server

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

    # --- start ------------------------------------------------------------------------------------

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
        """Create the instance (or find it), set up its mounts and bring up every server that is not running.

        ``mounts`` replaces the instance's volumes; None keeps the ones it had. ``app`` is the
        deployment's server (``backends.AppLaunch`` as a dict), None for none, or ``...`` to keep what
        the instance had. Returns the state to persist: ``{"version", "ports", "dir", "login_user",
        "mounts"}``. Servers that are alive are left alone, so a repeat starts nothing; a crashed one is
        started again.
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
                mounts=mounts,
                app=app,
            )
            meta["mounted"] = self._mounts_apply(paths, meta)
            self._save_meta(paths, meta)
            services = self.services_of(meta)
            ports = self.ports.allocate(key, list(services))
            env = self._environment(key, paths, meta)
            spawned = False
            for service in services:
                if self._alive(paths, service) is not None:
                    continue
                command = self._command(key, service, paths, ports[service], meta, env)
                self._spawn(paths, command, env)
                spawned = True
            if spawned:
                self._activity_mark(paths)  # a (re)start is use: the idle clock starts now
            return {
                "version": STATE_VERSION,
                "ports": ports,
                "dir": str(paths.base),
                "login_user": meta["login_user"],
                "mounts": [
                    {"path": m["path"], "read_only": m["read_only"], "enforced": m["enforced"]}
                    for m in meta["mounted"].values()
                ],
            }

    def services_of(self, meta: dict | None) -> tuple[str, ...]:
        """The servers this instance runs: the configured entry points, plus its app if it has one."""
        app = (meta or {}).get("app") or {}
        return self.services + ((APP,) if app else ()) + ((WEBUI,) if app.get("webui") else ())

    def _write_meta(self, key, paths, *, owner_ref, gpus, ssh_public_keys, mounts, app=...) -> dict:
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
            mounts=[asdict(m) for m in mounts] if mounts is not None else meta.get("mounts", []),
            login_user=servers.sshd_login_user(),
        )
        meta.setdefault("mounted", {})
        self._save_meta(paths, meta)
        host_key = paths.run / "ssh_host_ed25519_key"
        if SSH in self.services and not host_key.exists():
            subprocess.run(  # noqa: S603
                [self.ssh_keygen_bin, "-q", "-t", "ed25519", "-N", "", "-C", f"instance-{key}", "-f", str(host_key)],
                check=True,
                capture_output=True,
            )
        return meta

    # --- volumes and mounts -----------------------------------------------------------------------

    def all_mounts(self, meta: dict) -> list[Mount]:
        """The instance's volumes, then the host's public directories (read-only) at paths no volume took."""
        mounts = [Mount(**record) for record in meta.get("mounts", [])]
        taken = [m.path.rstrip("/") for m in mounts]
        for path, source in sorted(self.public_mounts.items()):
            point = path.rstrip("/")
            # A volume at or under the point wins (a read-only mount cannot hold another's mount point).
            if not any(t == point or t.startswith(point + "/") for t in taken):
                Path(source).mkdir(parents=True, exist_ok=True)
                mounts.append(Mount(source=source, path=path, read_only=True))
        return mounts

    def _mounts_apply(self, paths: Paths, meta: dict) -> dict[str, dict]:
        """Make the home's mount targets match ``meta["mounts"]``; returns what is mounted, by target."""
        wanted: dict[str, Mount] = {}
        for mount in self.all_mounts(meta):
            if not Path(mount.source).is_dir():
                raise LocalRuntimeError(f"the volume for {mount.path} does not exist on this host")
            wanted[str(mount.target(paths.home))] = mount
        mounted: dict[str, dict] = dict(meta.get("mounted") or {})
        for target, record in list(mounted.items()):
            mount = wanted.get(target)
            if mount is None or mount.source != record["source"] or mount.read_only != record["read_only"]:
                _unmount(Path(target), record)
                del mounted[target]
        for target, mount in wanted.items():
            if target in mounted and _mount_intact(Path(target), mounted[target]):
                continue
            mounted[target] = _mount(Path(target), mount)
        return mounted

    def _mounts_clear(self, paths: Paths) -> None:
        meta = self.meta(paths.base.name)
        if not meta or not meta.get("mounted"):
            return
        for target, record in meta["mounted"].items():
            _unmount(Path(target), record)
        meta["mounted"] = {}
        self._save_meta(paths, meta)

    def mounts(self, key: str) -> list[dict]:
        """What instance ``key`` has mounted now: ``[{"path", "target", "read_only", "enforced"}]``."""
        meta = self.meta(key) or {}
        return [{"target": target, **record} for target, record in (meta.get("mounted") or {}).items()]

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
        for mount in self.all_mounts(meta):
            env[mount.env_name] = str(mount.target(paths.home))
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
            # PATH too: a command over SSH finds the instance's Python (the one JupyterLab's kernels use).
            session_env = {k: v for k, v in env.items() if k not in {"USER", "LOGNAME", "SHELL", "TERM"}}
            profile = paths.home / ".profile"
            if not profile.exists():
                # A login shell's /etc/profile resets PATH; the default ~/.profile (the user's to edit,
                # as on a cloud image) puts the instance's Python first again.
                profile.write_text(
                    "# Written once by the console; yours to edit.\n"
                    f'export PATH="{Path(self.jupyter_bin).parent}:$PATH"\n'
                    'if [ -n "$BASH_VERSION" ] && [ -f "$HOME/.bashrc" ]; then . "$HOME/.bashrc"; fi\n'
                )
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
                # The app's command names paths as the instance sees them (/mnt/data/...).
                mounts={m.path: str(m.target(paths.home)) for m in self.all_mounts(meta)},
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

    # --- idleness (auto-stop) --------------------------------------------------------------------

    def _activity_mark(self, paths: Paths, at: float | None = None) -> None:
        record = paths.run / "activity.json"
        tmp = record.with_suffix(".tmp")
        tmp.write_text(json.dumps({"last_active": at if at is not None else time.time()}))
        os.replace(tmp, record)

    def idle_seconds(self, key: str, *, gpu_busy: bool = False, now: float | None = None) -> int | None:
        """How long nobody has used instance ``key``, or None when it does not exist.

        Use is judged the way people use an instance, not by a browser tab being open: a GPU of its
        busy (``gpu_busy``, from nvidia-smi), a Jupyter kernel executing or any notebook/terminal
        activity (JupyterLab's own ``last_activity``, which its status endpoint does not touch), an
        SSH session open, a VS Code window or an app client connected. A long training run in a
        kernel or over SSH keeps it in use; a forgotten instance with nothing open goes idle.
        """
        meta = self.meta(key)
        if meta is None:
            return None
        paths = self.paths(key)
        now = time.time() if now is None else now
        try:
            last = float(json.loads((paths.run / "activity.json").read_text())["last_active"])
        except (OSError, ValueError, KeyError, TypeError):
            last = float(meta.get("created", now))
        lab_last, lab_busy = self._lab_activity(key)
        if lab_last is not None:
            last = max(last, lab_last)
        if gpu_busy or lab_busy or self._sessions_open(key, paths):
            last = now
            self._activity_mark(paths, now)
        return max(0, int(now - last))

    def _lab_activity(self, key: str) -> tuple[float | None, bool]:
        """(JupyterLab's last activity as a timestamp, whether a kernel is executing now)."""
        upstream = self.upstream(key, LAB)
        if upstream is None or self._alive(self.paths(key), LAB) is None:
            return None, False
        return jupyter_activity(upstream, self.base_url(key, LAB))

    def _sessions_open(self, key: str, paths: Paths) -> bool:
        """An SSH session, or a client connected to VS Code or the app (the proxy holds these open)."""
        ports = self.ports.get(key)
        for service in (SSH, CODE, APP, WEBUI):
            process = self._alive(paths, service)
            if process is None:
                continue
            try:
                family = [process, *process.children(recursive=True)]
            except psutil.Error:
                continue
            if service == SSH:
                # sshd forks "sshd: user@pts/0" (or @notty) per logged-in session.
                if any("@" in " ".join(_cmdline(child)) for child in family[1:]):
                    return True
                continue
            port = ports.get(service)
            for member in family:
                try:
                    connections = member.net_connections(kind="tcp")
                except psutil.Error:
                    continue
                if any(c.status == psutil.CONN_ESTABLISHED and c.laddr.port == port for c in connections):
                    return True
        return False

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
            self._mounts_clear(paths)
            self.ports.release(key)
            self.gpus.release(key)

    def restart(
        self, key: str, *, mounts: Sequence[Mount] | None = None, app: dict | type[Ellipsis] | None = ...
    ) -> dict:
        """Kill the instance's processes and start its servers again, keeping its ports and GPUs.

        ``mounts`` replaces its volumes (None keeps them); ``app`` the app to run from now on (None:
        none), or ``...`` to keep the instance's."""
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
            mounts=mounts,
            app=app,
        )

    def destroy(self, key: str) -> None:
        """Stop the instance and delete its directory. Already gone counts as done."""
        paths = self.paths(key)
        with self._lock(key):
            self._kill(key)
            self.ports.release(key)
            self.gpus.release(key)
            # Unmount first: deleting the directory must never reach into a volume.
            self._mounts_clear(paths)
            for mountpoint in sorted(_mountpoints_under(paths.base), key=len, reverse=True):
                _umount(mountpoint)
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


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def _tail(path: Path, lines: int = 5, limit: int = 2000) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - limit))
            text = handle.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


# --- mounts ---------------------------------------------------------------------------------------


def _can_bind_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


def _run(*argv: str) -> bool:
    return subprocess.run(argv, capture_output=True, check=False).returncode == 0  # noqa: S603


def _mountpoints() -> set[str]:
    """Every mount point of this process's mount namespace (``/proc/self/mountinfo``, unescaped)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return set()
    points = set()
    for line in lines:
        fields = line.split(" ")
        if len(fields) > 4:  # the kernel writes space, tab, newline and backslash as \ooo
            points.add(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
    return points


def _real(target: Path) -> str:
    """``target`` as the kernel lists it (its parents resolved; a link at ``target`` itself not followed)."""
    return os.path.join(os.path.realpath(target.parent), target.name)


def _is_mountpoint(target: Path) -> bool:
    return _real(target) in _mountpoints()


def _mountpoints_under(base: Path) -> list[str]:
    prefix = os.path.realpath(base).rstrip("/") + "/"
    return [p for p in _mountpoints() if p.startswith(prefix)]


def _umount(target: str) -> None:
    if not _run("umount", target):
        _run("umount", "-l", target)  # busy: detach it now, the kernel frees it when unused


def _clear_target(target: Path, path: str) -> None:
    """Make room for mount ``path`` at ``target``: only what we made there (a link, an empty directory) goes."""
    if _is_mountpoint(target):
        _umount(_real(target))
    if target.is_symlink():
        target.unlink()
    elif target.is_dir():
        try:
            target.rmdir()
        except OSError as exc:
            raise LocalRuntimeError(
                f"{path} already holds files on the instance's own disk; move them away to mount a volume there"
            ) from exc
    elif target.exists():
        raise LocalRuntimeError(f"a file on the instance's own disk is in the way of the mount at {path}")


def _mount(target: Path, mount: Mount) -> dict:
    """Set up one mount; returns its record (``kind``: "link" or "bind"; ``enforced``: read-only is real)."""
    record = {"source": mount.source, "path": mount.path, "read_only": mount.read_only}
    target.parent.mkdir(parents=True, exist_ok=True)
    _clear_target(target, mount.path)
    if mount.read_only and _can_bind_mount():
        target.mkdir()
        if _run("mount", "--bind", mount.source, str(target)):
            if _run("mount", "-o", "remount,bind,ro", str(target)):
                return {**record, "kind": "bind", "enforced": True}
            _umount(str(target))
        target.rmdir()
    target.symlink_to(mount.source, target_is_directory=True)
    return {**record, "kind": "link", "enforced": not mount.read_only}


def _mount_intact(target: Path, record: dict) -> bool:
    if record.get("kind") == "bind":
        return _is_mountpoint(target)
    return target.is_symlink() and os.readlink(target) == record["source"]


def _unmount(target: Path, record: dict) -> None:
    """Take one mount down (unmount or unlink), leaving the empty directory a bind mount needed."""
    if record.get("kind") == "bind":
        if _is_mountpoint(target):
            _umount(_real(target))
        with contextlib.suppress(OSError):
            target.rmdir()
    elif target.is_symlink():
        target.unlink()
