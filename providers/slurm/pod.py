"""A Slurm job's instance as a rootless podman container of its image, under the image contract.

The job (``providers.slurm.job``) runs as the tenant's own Unix user. With the ``podman`` engine (the
default, as on the local backend) it runs the instance's image (the digest the console pinned at
launch) with the tenant's own rootless podman, under the same contract as the local backend's
containers (``images/contract/README.md``; the ``podman run`` arguments are ``container_spec.run_argv``):
tini as PID 1, the servers as uid 1000, secrets from a read-only folder, ``/run`` and ``/tmp`` tmpfs,
the instance's disk at ``/home/user`` and its ports published on the job's bind address only.

What differs from the local backend, and why:

- The user namespace is the tenant's *own*: ``--userns=keep-id:uid=1000,gid=1000`` maps the tenant's
  Unix uid to the container's uid 1000 (so the instance's disk and secrets folder, owned by that uid on
  the shared filesystem, are the user's inside) and the container's other uids to the tenant's
  subordinate range (``/etc/subuid``: the console's allocation, ``instances.tenancy``; never another
  tenant's). The container's root is thus a uid of that range, never the host's.
- Limits are the job's: rootless podman on cgroup v1 can set none, and needs none: the container's
  processes stay in the job's cgroup, where Slurm's task/cgroup holds the cores and memory the job
  asked for, and whose OOM kills the job reports. ``scancel`` kills that cgroup whole, so nothing of
  the instance outlives its job; ``--rm --replace`` clears what a killed run left in podman's store.
- The image store is the tenant's (``~/.local/share/containers``, set up by ``podman_config_write``):
  an image is pulled once per tenant and node host, then cached. The network is slirp4netns (rootless
  podman's default): the container reaches neither the host's loopback nor other tenants' ports.

This module must not import Django: it runs on compute nodes (see ``providers.slurm.job``).
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import stat
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from providers.local.runtime.base import (
    InstanceStatus,
    LocalRuntimeError,
    Mount,
    ServerState,
    ServerStatus,
    Upstream,
    jupyter_activity,
)
from providers.local.runtime.cdi import CdiError, cdi_devices
from providers.local.runtime.container_files import secrets_folder_write
from providers.local.runtime.container_spec import (
    CONTAINER_PORTS,
    CONTAINER_UID,
    CONTRACT_LABEL,
    HOME_PATH,
    INSTANCE_LABEL,
    LOGIN_USER,
    _registry_of,
    contract_tools,
    run_argv,
    server_answers,
)
from providers.local.runtime.podman import PROJECT_ROOT, Podman, PodmanError, last_words
from providers.local.runtime.servers import ALL_SERVICES, CODE, LAB, SSH, Paths

ENGINES = ("podman", "process")
# The container's uid 1000 is the tenant's own uid; the rest of the container's uids its subordinate range.
# keep-id would also make uid 1000 the container's user: the contract's tini and start script run as its
# root (a uid of the range), which hands the servers to uid 1000.
USERNS = ("--userns", f"keep-id:uid={CONTAINER_UID},gid={CONTAINER_UID}", "--user", "0:0")
PULL_TIMEOUT_S = 1800


def podman_config(home: Path, *, uid: int) -> dict[str, str]:
    """The tenant's rootless podman settings, by path under its home: its own image store (else
    ``commit`` fails with "runroot must be set"), runc (crun fails on cgroup v1 hybrid hosts), cgroupfs
    (no systemd), and the ulimits an unprivileged user may set."""
    return {
        ".config/containers/storage.conf": (
            "# Written by the console: this tenant's own image store (rootless podman).\n"
            "[storage]\n"
            'driver = "overlay"\n'
            f'graphroot = "{home}/.local/share/containers/storage"\n'
            f'runroot = "{runtime_dir_default(uid)}/containers"\n'
        ),
        ".config/containers/containers.conf": (
            "# Written by the console: rootless podman in the tenant's Slurm jobs.\n"
            "[containers]\n"
            'default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]\n'
            'log_driver = "k8s-file"\n'
            "log_size_max = 10485760\n"
            "init = false\n"
            "\n[engine]\n"
            'runtime = "runc"\n'
            'cgroup_manager = "cgroupfs"\n'
            'events_logger = "file"\n'
        ),
    }


def podman_config_write(home: Path, *, uid: int, owner: int | None = None) -> bool:
    """Write the tenant's podman settings under ``home`` where they differ (idempotent); True when it
    wrote any. ``owner``: chown what it makes to that uid (root provisioning a tenant)."""
    wrote = False
    for relative, text in podman_config(home, uid=uid).items():
        path = home / relative
        try:
            if path.read_text() == text:
                continue
        except OSError:
            pass
        made = [p for p in reversed(path.relative_to(home).parents) if str(p) != "." and not (home / p).exists()]
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text)
        if owner is not None:
            for folder in made:
                os.chown(home / folder, owner, owner)
            os.chown(tmp, owner, owner)
        os.replace(tmp, path)
        wrote = True
    return wrote


def runtime_dir_default(uid: int) -> str:
    """Where the tenant's podman keeps its runtime state on a node (``XDG_RUNTIME_DIR`` and the
    store's runroot): node-local, the tenant's alone (a Slurm node has no logind to make
    ``/run/user/<uid>``)."""
    return f"/tmp/console-podman-{uid}"  # noqa: S108 (node-local on purpose; its owner and mode are checked)


def runtime_dir_ensure(uid: int, *, owner: int | None = None) -> Path:
    """``runtime_dir_default``, made 0700 when missing (as ``owner`` when root provisions it), and
    refused when anyone else made it first (another tenant could then read or plant podman's state
    there) or it is a link."""
    path = Path(runtime_dir_default(uid))
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
        if owner is not None:
            os.chown(path, owner, owner)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or stat.S_IMODE(info.st_mode) & 0o077:
        raise LocalRuntimeError(
            f"podman's runtime folder {path} is not this tenant's own (owner uid {info.st_uid}, mode "
            f"{stat.S_IMODE(info.st_mode):o}): the instance was not started"
        )
    return path


def _follows_contract(info: dict) -> bool:
    labels = (info.get("Config") or {}).get("Labels") or info.get("Labels") or {}
    return labels.get(CONTRACT_LABEL) == "1"


class PodPaths(Paths):
    """The instance's directory as the Slurm backend lays it out, and the contract's secrets folder."""

    @property
    def secrets(self) -> Path:
        return self.base / "secrets"


class PodRuntime:
    """The instance's container as its job runs it (see the module's docstring). The job asks it what
    it asks the process runtime: start, status, stop, idle time, and a command run inside."""

    login_user = LOGIN_USER  # the contract's user, whom SSH logs in

    def __init__(
        self,
        *,
        root: str | os.PathLike,
        services: Sequence[str] = ALL_SERVICES,
        url_prefix: str = "/i/",
        bind: str = "127.0.0.1",
        public_mounts: Mapping[str, str] | None = None,
        registries_insecure: Sequence[str] = ("127.0.0.1", "localhost"),
        code_server_dir: str = "",
        node_bin: str = "",
        home: str | os.PathLike = "",
        stop_timeout: float = 3.0,
    ) -> None:
        self.root = Path(root)
        self.services = tuple(s for s in services if s in CONTAINER_PORTS)
        self.url_prefix = url_prefix
        self.bind = bind
        self.public_mounts = dict(public_mounts or {})
        self.registries_insecure = tuple(registries_insecure)
        self.code_server_dir = code_server_dir or str(PROJECT_ROOT / "var/local-deps/code-server")
        self.node_bin = node_bin or shutil.which("node") or ""
        # The tenant's own home, from the user database: the job's environment is its submitter's
        # (``sbatch --uid`` as root exports root's HOME).
        self.home = Path(home or pwd.getpwuid(os.getuid()).pw_dir)
        self.stop_timeout = stop_timeout
        self.podman = Podman(conf_dir=self.home / ".config/containers")
        self.ports = None  # the job gives it the node's port registry
        self.gpus = None
        self.started = 0.0
        # The node's own indices of the job's cards (``SLURM_STEP_GPUS``), which a CDI spec names.
        self.node_gpus: list[str] = []
        self.cdi_spec_dirs: tuple[str, ...] = ("/etc/cdi", "/var/run/cdi")

    # --- the same surface as the process runtime, where the job uses it ------------------------------

    def paths(self, key: str) -> PodPaths:
        if not key or "/" in key or key.startswith(".") or len(key) > 64:
            raise LocalRuntimeError(f"invalid instance key {key!r}")
        return PodPaths(self.root / key)

    def meta(self, key: str) -> dict | None:
        try:
            return json.loads(self.paths(key).meta.read_text())
        except (OSError, ValueError):
            return None

    def base_url(self, key: str, service: str) -> str:
        return f"{self.url_prefix}{key}/{service}/"

    @staticmethod
    def container_name(key: str) -> str:
        return f"console-{key}"

    def missing(self) -> str:
        """Why this node cannot run the instance's container ("" when it can): never a reason to run
        its servers as host processes instead."""
        if shutil.which("podman") is None:
            return "podman is not installed on this node: the instance's image cannot run here"
        if shutil.which("runc") is None:
            return "runc is not installed on this node: the instance's image cannot run here"
        if not shutil.which("newuidmap"):
            return "newuidmap is not installed on this node (Debian's uidmap): rootless podman cannot run"
        return ""

    def prepare(self) -> None:
        """The tenant's podman settings (written here too, so a site-provisioned user needs no more than
        its subordinate range) and runtime folder; podman reads them through the environment."""
        why = self.missing()
        if why:
            raise LocalRuntimeError(why)
        uid = os.getuid()
        podman_config_write(self.home, uid=uid)
        runtime = runtime_dir_ensure(uid)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)
        os.environ["HOME"] = str(self.home)  # podman's per-user files (registries.conf, auth) are the tenant's
        for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
            os.environ.pop(name, None)
        for folder in ("tmp", "cwd"):
            (self.podman.conf_dir / folder).mkdir(exist_ok=True)

    def start(self, key: str, *, owner_ref: str = "", gpus: Sequence[str] = (), ssh_public_keys=()) -> dict:
        """Pull the image unless the tenant's store has it, then run the container (replacing what a
        killed run left); returns ``{"ports": …}`` as the process runtime does."""
        self.prepare()
        paths = self.paths(key)
        meta = self.meta(key) or {}
        image = str(meta.get("image") or "")
        if not image:
            raise LocalRuntimeError("the instance names no image to run")
        try:
            # The job's cards through CDI, where the node has NVIDIA's spec (none: simulated cards).
            devices = cdi_devices(self.node_gpus or list(gpus), spec_dirs=self.cdi_spec_dirs)
        except CdiError as exc:
            raise LocalRuntimeError(str(exc)) from exc
        if devices:
            gpus = [str(i) for i in range(len(devices))]  # the container numbers its cards from 0
        info = self._image_ready(paths, image)
        ports = self.ports.allocate(key, list(self.services))
        self._secrets_write(key, paths, meta, gpus=gpus, ssh_public_keys=ssh_public_keys)
        name = self.container_name(key)
        if self.started and (self.podman.inspect("container", name) or {}).get("State", {}).get("Status") == "running":
            return {"ports": ports}  # a repair after an OOM kill inside: the container itself runs on
        argv = run_argv(
            name=name,
            image=image,
            tenant={},
            limits=None,
            ports=ports,
            secrets_dir=str(paths.secrets),
            home_dir=str(paths.home),
            hostkeys_dir=self._hostkeys(key, paths) if SSH in self.services else "",
            mounts=[Mount(**m) for m in meta.get("mounts", [])],
            public_mounts={path: src for path, src in self.public_mounts.items() if Path(src).is_dir()},
            gpu_devices=devices,
            tools=self._tools(),
            contract=_follows_contract(info),
            bind=self.bind,
            labels={INSTANCE_LABEL: key},
            userns=list(USERNS),
            lifetime=("--rm", "--replace"),
        )
        try:
            self.podman.run(*argv, timeout=120)
        except PodmanError as exc:
            raise LocalRuntimeError(f"the container could not start: {exc}") from exc
        self.started = time.time()
        return {"ports": ports}

    def _hostkeys(self, key: str, paths: PodPaths) -> str:
        """The sshd's host key, made once per instance beside its disk and then handed to the container's
        root (``podman unshare chown`` to 1:1, the container's uid 0 under ``keep-id``): the same key after
        every start, so the SSH gateway's pin holds, and out of reach of uid 1000 inside, which is this
        tenant's own uid (the local backend does the same as root: ``container_files.hostkey_ensure``)."""
        folder = paths.base / "hostkeys"
        if folder.is_dir() and folder.stat().st_uid != os.getuid():
            return str(folder)  # made and handed over at an earlier start
        folder.mkdir(mode=0o700, exist_ok=True)
        private = folder / "ssh_host_ed25519_key"
        if not private.exists():
            made = subprocess.run(  # noqa: S603
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"instance-{key}", "-f", str(private)],  # noqa: S607
                capture_output=True,
                text=True,
                check=False,
            )
            if made.returncode != 0:
                raise LocalRuntimeError(f"the instance's SSH host key could not be made: {last_words(made.stderr)}")
        os.chmod(private, 0o400)
        try:
            self.podman.run("unshare", "chown", "-R", "1:1", str(folder), timeout=60)
        except PodmanError as exc:
            raise LocalRuntimeError(f"the SSH host key could not be handed to the container: {exc}") from exc
        return str(folder)

    def _image_ready(self, paths: PodPaths, image: str) -> dict:
        """The image's description from the tenant's store, pulled there first when it is not in it."""
        info = self.podman.inspect("image", image)
        if info is not None:
            return info
        if "/" not in image.split("@")[0] or _registry_of(image) == "localhost":
            raise LocalRuntimeError(f"the image {image} names no registry this node can pull it from")
        args = ["pull", "--quiet"]
        if _registry_of(image).split(":")[0] in self.registries_insecure:
            args.append("--tls-verify=false")
        log = paths.run / "pull.log"
        with open(log, "w") as out:
            try:
                done = subprocess.run(  # noqa: S603
                    [self.podman.binary, *args, image],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=self.podman.env(),
                    cwd=self.podman.workdir,
                    timeout=PULL_TIMEOUT_S,
                    check=False,
                )
                returncode = done.returncode
            except subprocess.TimeoutExpired:
                returncode = -1
        if returncode != 0:
            said = last_words(log.read_text(errors="replace")) if log.exists() else ""
            raise LocalRuntimeError(f"the image {image} could not be pulled: {said or 'podman pull failed'}")
        return self.podman.inspect("image", image) or {}

    def _tools(self) -> dict[str, str]:
        return contract_tools(services=self.services, code_server_dir=self.code_server_dir, node_bin=self.node_bin)

    def _secrets_write(self, key: str, paths: PodPaths, meta: dict, *, gpus: Sequence[str], ssh_public_keys) -> None:
        """The contract's read-only folder, owned by the tenant's uid (the container's uid 1000)."""
        settings = {
            "CONSOLE_SERVICES": " ".join(self.services),
            "CONSOLE_LAB_BASE_URL": self.base_url(key, LAB),
            "CONSOLE_LAB_PORT": str(CONTAINER_PORTS[LAB]),
            "CONSOLE_CODE_PORT": str(CONTAINER_PORTS[CODE]),
            "CONSOLE_SSH_PORT": str(CONTAINER_PORTS[SSH]),
            "CONSOLE_GPUS": ",".join(str(g) for g in gpus),
        }
        secrets = meta.get("secrets") or {}
        files = {
            "console.env": "".join(f"{k}='{v}'\n" for k, v in settings.items()),
            "lab_token": str(secrets.get(LAB, "")) + "\n",
            "code_secret": str(secrets.get(CODE, "")) + "\n",
            "authorized_keys": "".join(k.strip() + "\n" for k in ssh_public_keys if k.strip()),
        }
        if paths.secrets.exists():
            os.chmod(paths.secrets, 0o700)
        secrets_folder_write(paths.secrets, files, owner=os.getuid())

    def status(self, key: str) -> InstanceStatus:
        info = self.podman.inspect("container", self.container_name(key))
        state = (info or {}).get("State") or {}
        running = state.get("Status") == "running"
        ports = self.ports.get(key)
        meta = self.meta(key) or {}
        servers: dict[str, ServerStatus] = {}
        for service in self.services:
            port = ports.get(service)
            if running and port:
                up = self._answers(key, service, port, meta)
                servers[service] = ServerStatus(service, ServerState.RUNNING if up else ServerState.STARTING, port)
            else:
                detail = f"the container stopped: {last_words(self.logs(key))}" if info is not None else ""
                servers[service] = ServerStatus(
                    service, ServerState.CRASHED, port, detail=detail or "its container is gone"
                )
        return InstanceStatus(key=key, exists=True, servers=servers)

    def _answers(self, key: str, service: str, port: int, meta: dict) -> bool:
        host = "127.0.0.1" if self.bind in ("0.0.0.0", "::") else self.bind  # noqa: S104 (a comparison)
        token = (meta.get("secrets") or {}).get(LAB, "")
        return server_answers(service=service, host=host, port=port, lab_url=self.base_url(key, LAB), lab_token=token)

    def logs(self, key: str, lines: int = 20) -> str:
        result = self.podman.run("logs", "--tail", str(lines), self.container_name(key), check=False)
        return (result.stdout + result.stderr).strip()

    def idle_seconds(self, key: str) -> int | None:
        meta = self.meta(key) or {}
        ports = self.ports.get(key)
        now = time.time()
        last = self.started or now
        if LAB in ports:
            secret = (meta.get("secrets") or {}).get(LAB, "")
            upstream = Upstream(host="127.0.0.1", port=ports[LAB], service=LAB, secret=secret)
            stamp, busy = jupyter_activity(upstream, self.base_url(key, LAB))
            if busy:
                return 0
            if stamp:
                last = max(last, stamp)
        return max(0, int(now - last))

    def exec_argv(self, key: str, command: str) -> list[str]:
        """``podman exec`` of the owner's ``command`` in the container, as its user in its home."""
        return [
            self.podman.binary, "exec", "--user", str(CONTAINER_UID), "--workdir", HOME_PATH,
            self.container_name(key), "/bin/bash", "-lc", command,
        ]  # fmt: skip

    def stop(self, key: str) -> None:
        """Stop the container (``--rm``: podman removes it); what is left the job's cgroup kill takes."""
        name = self.container_name(key)
        self.podman.run("stop", "-t", f"{self.stop_timeout:g}", name, check=False, timeout=30)
