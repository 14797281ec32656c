"""The container runtime: each instance is a rootful podman container of its image, in its tenant's
own uid range, on this host.

An instance is ``<root>/<key>/`` (root-owned, never mounted into the container) plus one container
named ``console-<key>``:

- ``run/`` (0700, root): ``meta.json`` (the servers' secrets, the tenant, limits) and logs. Out of
  the tenant's reach: nothing under it is mounted into any container.
- ``secrets/`` (0500, owned by the tenant's uid 1000): the contract's read-only folder
  (``images/contract/README.md``): the servers' tokens, the authorized keys, ``console.env``.
- ``home.img``: the instance's disk, an ext4 file of ``disk_gb`` (sparse: it takes what is written),
  loop-mounted at ``home/`` while the instance runs and mounted at ``/home/user`` in the container.
  Overlay's ``--storage-opt size=`` needs XFS project quotas, which an ext4 host has not; a
  filesystem of its own enforces ``disk_gb`` on any host. Stop and start keep it; release deletes it.

The container runs with ``--uidmap 0:<uid_base>:<uid_count>`` (its root is an unprivileged uid of
the tenant's range on the host), CPU, memory and pids limits, dropped capabilities,
``no-new-privileges``, tmpfs ``/run`` and ``/tmp``, its servers' ports published on 127.0.0.1 only
(the console's proxy and SSH gateway reach them there) and on a network of its tenant's own
(``console-t<uid_base>``, isolated from other tenants' networks). After every start the runtime reads
``/proc/<pid>/uid_map`` of the container's init: without a user namespace of its own (the tenant's
range) the instance is removed and never reported running.

Every method may be repeated (a per-instance ``flock`` serialises them across processes), and
"already gone" counts as done. Stopping stops the container (tini passes SIGTERM to every process
of it; podman kills what is left after the timeout), so nothing of an instance outlives it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import http.client
import json
import os
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath

from providers.local.runtime import servers
from providers.local.runtime.cdi import CdiError, cdi_devices
from providers.local.runtime.gpus import GpuRegistry
from providers.local.runtime.podman import PROJECT_ROOT, Podman, PodmanError, last_words
from providers.local.runtime.ports import PortRegistry
from providers.local.runtime.servers import APP, CODE, LAB, SSH, WEBUI
from providers.local.runtime.supervisor import (
    InstanceStatus,
    LocalRuntimeError,
    Mount,
    ServerState,
    ServerStatus,
    Upstream,
    _answers,
    _disk_usage,
)

STATE_VERSION = 2
BOOT_FAILED = "failed"  # providers.base.BOOT_FAILED: a boot that cannot succeed
CONTAINER_PORTS = {LAB: 8888, CODE: 8080, SSH: 2222}
CONTRACT_LABEL = "org.gpu-console.contract"
INSTANCE_LABEL = "org.gpu-console.instance"
SECRETS_PATH = "/run/console-secrets"
HOSTKEYS_PATH = "/run/console-hostkeys"
HOME_PATH = "/home/user"
LOGIN_USER = "user"
CONTAINER_UID = 1000
DEFAULT_IMAGE = "localhost/console/minimal:latest"
# Capabilities the servers do not need (sshd keeps SETUID/SETGID/SYS_CHROOT to log users in).
CAP_DROP = ("NET_RAW", "MKNOD", "AUDIT_WRITE", "SETFCAP", "NET_ADMIN", "SYS_ADMIN")


@dataclass(frozen=True)
class Limits:
    """What one instance may use on this host; the spec's figures are capped to what it has."""

    cpus: float
    memory_gb: float
    pids: int


@dataclass(frozen=True)
class ContainerPaths(servers.Paths):
    """The process runtime's layout (``home``, ``run``, ``meta.json``), and what a container adds."""

    @property
    def secrets(self) -> Path:
        return self.base / "secrets"

    @property
    def hostkeys(self) -> Path:
        return self.base / "hostkeys"

    @property
    def home_image(self) -> Path:
        return self.base / "home.img"


def limits_for(*, cpus: float, memory_gb: float, options: Mapping) -> Limits:
    """The spec's CPU and RAM (the catalogue's per card × cards), within this host's caps.

    ``CPUS`` / ``MEMORY_GB`` in the options replace the spec's figures (a small test host);
    ``MAX_CPUS`` (default: the host's cores) and ``MAX_MEMORY_GB`` (default: half its RAM) cap them;
    without figures an instance gets ``DEFAULT_CPUS`` (1) and ``DEFAULT_MEMORY_GB`` (2)."""
    host_cpus = os.cpu_count() or 1
    try:
        host_memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        host_memory_gb = 4.0
    want_cpus = float(options.get("CPUS") or cpus or options.get("DEFAULT_CPUS") or 1)
    want_memory = float(options.get("MEMORY_GB") or memory_gb or options.get("DEFAULT_MEMORY_GB") or 2)
    max_cpus = float(options.get("MAX_CPUS") or host_cpus)
    max_memory = float(options.get("MAX_MEMORY_GB") or max(1.0, host_memory_gb / 2))
    return Limits(
        cpus=round(max(0.1, min(want_cpus, max_cpus)), 2),
        memory_gb=round(max(0.25, min(want_memory, max_memory)), 2),
        pids=int(options.get("PIDS_LIMIT") or 1024),
    )


def run_argv(
    *,
    name: str,
    image: str,
    tenant: Mapping,
    limits: Limits,
    ports: Mapping[str, int],
    secrets_dir: str,
    home_dir: str,
    hostkeys_dir: str = "",
    mounts: Sequence[Mount] = (),
    public_mounts: Mapping[str, str] | None = None,
    gpu_devices: Sequence[str] = (),
    tools: Mapping[str, str] | None = None,
    contract: bool = True,
    network: str = "",
    bind: str = "127.0.0.1",
    labels: Mapping[str, str] | None = None,
) -> list[str]:
    """The ``podman run`` arguments of one instance (pure, so a test reads exactly what would run).

    ``tools``: host paths mounted read-only under /opt/console (``console-start``, ``code-server``,
    ``node``, ``tini``). ``contract``: the image follows the contract; otherwise the console's start
    script is the entrypoint, under the host's static tini."""
    uid_base, uid_count = int(tenant["uid_base"]), int(tenant["uid_count"])
    memory = f"{int(limits.memory_gb * 1024)}m"
    argv = [
        "run",
        "-d",
        "--name",
        name,
        "--hostname",
        name.removeprefix("console-")[:12] or "instance",
        "--uidmap",
        f"0:{uid_base}:{uid_count}",
        "--gidmap",
        f"0:{uid_base}:{uid_count}",
        "--cpus",
        f"{limits.cpus:g}",
        "--memory",
        memory,
        "--memory-swap",
        memory,  # no swap beyond the limit: an allocation over it is killed, not paged out
        "--pids-limit",
        str(limits.pids),
        "--cap-drop",
        ",".join(CAP_DROP),
        "--security-opt",
        "no-new-privileges",
        "--tmpfs",
        "/run:rw,exec,nosuid,nodev,size=64m,mode=0755",
        "--tmpfs",
        "/tmp:rw,nosuid,nodev,size=1g,mode=1777",  # noqa: S108 (the container's own /tmp)
        "--stop-timeout",
        "5",
        "--log-opt",
        "max-size=1mb",
    ]
    if network:
        argv += ["--network", network]
    for key, value in sorted((labels or {}).items()):
        argv += ["--label", f"{key}={value}"]
    for service, port in sorted(ports.items()):
        argv += ["-p", f"{bind}:{int(port)}:{CONTAINER_PORTS[service]}"]
    argv += ["-v", f"{secrets_dir}:{SECRETS_PATH}:ro", "-v", f"{home_dir}:{HOME_PATH}"]
    if hostkeys_dir:
        argv += ["-v", f"{hostkeys_dir}:{HOSTKEYS_PATH}:ro"]
    for path, source in sorted((public_mounts or {}).items()):
        argv += ["-v", f"{source}:{path}:ro"]
    for mount in mounts:
        _check_mount_path(mount.path)
        argv += ["-v", f"{mount.source}:{mount.path}" + (":ro" if mount.read_only else "")]
    for tool, source in sorted((tools or {}).items()):
        argv += ["-v", f"{source}:/opt/console/{tool}:ro"]
    for device in gpu_devices:
        argv += ["--device", device]
    if not contract:
        argv += ["--entrypoint", '["/opt/console/tini", "-g", "--", "/opt/console/console-start"]']
    argv.append(image)
    return argv


def _check_mount_path(path: str) -> None:
    pure = PurePosixPath(path)
    if (
        not pure.is_absolute()
        or any(part in (".", "..") for part in pure.parts)
        or path.rstrip("/")
        in (
            "",
            "/run",
            SECRETS_PATH,
            "/proc",
            "/sys",
            "/dev",
        )
        or ":" in path
        or "," in path
    ):
        raise LocalRuntimeError(f"invalid mount path {path!r}")


def uid_map_check(uid_map: str, *, uid_base: int, uid_count: int) -> str:
    """Why a container's uid map is not its tenant's range ("" when it is)."""
    rows = [line.split() for line in uid_map.strip().splitlines() if line.strip()]
    if not rows:
        return "its uid map could not be read"
    if any(len(row) == 3 and row[1] == "0" for row in rows):
        return "it runs in the host's user namespace (uid 0 is the host's root)"
    if len(rows) != 1 or rows[0] != ["0", str(uid_base), str(uid_count)]:
        return f"its uid map is {' / '.join(' '.join(r) for r in rows)}, not 0 {uid_base} {uid_count}"
    return ""


def pull_progress(log_text: str, layer_sizes: Mapping[str, int], downloaded: int = 0) -> int:
    """Bytes of the image fetched: what ``podman pull`` has downloaded so far (``downloaded``, the
    size of its download folder), or the layers its output says are done or already present
    ("Copying blob sha256:… done", "… skipped: already exists"), whichever is more; once it writes
    the manifest, all of them."""
    total = sum(layer_sizes.values())
    if "Writing manifest" in log_text:
        return total
    done = 0
    for digest, size in layer_sizes.items():
        short = digest.removeprefix("sha256:")
        for line in log_text.splitlines():
            if short[:12] in line and ("done" in line or "skipped" in line or "already exists" in line):
                done += size
                break
    return min(total, max(done, downloaded)) if total else max(done, downloaded)


class ContainerRuntime:
    """Start, stop, observe and destroy instances as podman containers (see the module's docstring)."""

    engine = "podman"

    def __init__(
        self,
        *,
        root: str | os.PathLike,
        podman: Podman | None = None,
        services: Sequence[str] = servers.ALL_SERVICES,
        port_low: int = 20000,
        port_high: int = 29999,
        url_prefix: str = "/i/",
        images: Mapping[str, str] | None = None,
        default_image: str = DEFAULT_IMAGE,
        limits: Mapping | None = None,
        public_mounts: Mapping[str, str | os.PathLike] | None = None,
        code_server_dir: str = "",
        node_bin: str = "",
        cdi_spec_dirs: Sequence[str] = ("/etc/cdi", "/var/run/cdi"),
        registries_insecure: Sequence[str] = ("127.0.0.1", "localhost"),
        bind: str = "127.0.0.1",
        stop_timeout: float = 5.0,
    ) -> None:
        self.root = Path(root)
        self.podman = podman or Podman()
        self.services = tuple(s for s in services if s in CONTAINER_PORTS)
        self.url_prefix = url_prefix
        self.images = dict(images or {})
        self.default_image = default_image
        self.limit_options = dict(limits or {})
        self.public_mounts = {str(path): str(source) for path, source in (public_mounts or {}).items()}
        self.code_server_dir = code_server_dir or str(PROJECT_ROOT / "var/local-deps/code-server")
        self.node_bin = node_bin or shutil.which("node") or ""
        self.cdi_spec_dirs = tuple(cdi_spec_dirs)
        self.registries_insecure = tuple(registries_insecure)
        self.bind = bind
        self.stop_timeout = stop_timeout
        self.ports = PortRegistry(self.root / "ports.json", low=port_low, high=port_high)
        self.gpus = GpuRegistry(self.root / "gpus.json")

    # --- what is installed ------------------------------------------------------------------------

    def missing_components(self) -> dict[str, str]:
        why = self.podman.missing()
        if not why and not shutil.which("mkfs.ext4"):
            why = "mkfs.ext4 is not installed (e2fsprogs)"
        if not why and os.geteuid() != 0:
            why = "the local backend runs rootful podman: the console must run as root on this host"
        return {"podman": why} if why else {}

    def app_missing(self, app: dict) -> str | None:
        """Why ``app`` cannot run here, or None. Its command runs inside the instance's container, so
        whether its program is installed is the image's business (an app that cannot start fails its
        launch with its own last words), not this host's."""
        for part in (app, app.get("webui")):
            if part is not None and not servers.app_program(part.get("argv") or ()):
                return f"the app {app.get('name', '')!r} has no start command"
        return None

    def image_for(self, *, image_ref: str, image_slug: str) -> str:
        """The image to run: the pinned reference, else the catalogue slug's mapping, else the default."""
        return image_ref or self.images.get(image_slug) or self.images.get("default") or self.default_image

    # --- paths, locks, metadata -------------------------------------------------------------------

    def paths(self, key: str) -> ContainerPaths:
        if not key or "/" in key or key.startswith(".") or len(key) > 64 or not re.fullmatch(r"[\w.-]+", key):
            raise LocalRuntimeError(f"invalid instance key {key!r}")
        return ContainerPaths(self.root / key)

    @staticmethod
    def container_name(key: str) -> str:
        return f"console-{key}"

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

    def _save_meta(self, paths: ContainerPaths, meta: dict) -> None:
        paths.run.mkdir(parents=True, exist_ok=True)
        os.chmod(paths.run, 0o700)
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
        tenant: Mapping | None = None,
        image: str = "",
        cpus: float = 0,
        memory_gb: float = 0,
        disk_gb: int = 0,
    ) -> dict:
        """Create the instance's container (or find it) and run it; returns the state to persist.

        The first start needs ``tenant`` (a ``providers.base.Tenant`` as a dict) and ``image``; later
        ones take them from the instance's metadata. ``mounts`` replaces its volumes (None keeps
        them): a change of volumes makes a new container (the disk is the home volume, kept)."""
        why = self.missing_components()
        if why:
            raise LocalRuntimeError("; ".join(why.values()))
        if app and app is not ...:
            reason = self.app_missing(app)
            if reason:
                raise LocalRuntimeError(reason)
        paths = self.paths(key)
        with self._lock(key):
            meta = self.meta(key) or {}
            if not meta and not tenant:
                raise LocalRuntimeError(
                    "this instance has no tenant (uid range): the local backend runs no container without one"
                )
            meta = self._meta_update(
                key,
                paths,
                meta,
                owner_ref=owner_ref,
                gpus=gpus,
                ssh_public_keys=ssh_public_keys,
                mounts=mounts,
                tenant=tenant,
                image=image,
                cpus=cpus,
                memory_gb=memory_gb,
                disk_gb=disk_gb,
                app=app,
            )
            tenant = meta["tenant"]
            self._home_mount(paths, meta)
            ports = self.ports.allocate(key, list(self.services))
            self._secrets_write(key, paths, meta, ports)
            name = self.container_name(key)
            info = self.podman.inspect("container", name)
            wanted = self._config_digest(meta, ports)
            if (
                info is not None
                and (info.get("Config", {}).get("Labels") or {}).get("org.gpu-console.config") != wanted
            ):
                self.podman.remove(name)  # its volumes, ports or image changed: a new container, same disk
                info = None
            if info is None:
                self._image_ready(key, paths, meta)
                contract = self._follows_contract(meta["image"])
                self._network_ensure(tenant)
                argv = run_argv(
                    name=name,
                    image=meta["image"],
                    tenant=tenant,
                    limits=Limits(**meta["limits"]),
                    ports=ports,
                    secrets_dir=str(paths.secrets),
                    home_dir=str(paths.home),
                    hostkeys_dir=str(paths.hostkeys) if SSH in self.services else "",
                    mounts=[Mount(**m) for m in meta.get("mounts", [])],
                    # The folders the operator has made (podman refuses a bind mount of a missing one).
                    public_mounts={path: src for path, src in self.public_mounts.items() if Path(src).is_dir()},
                    gpu_devices=meta.get("gpu_devices", []),
                    tools=self._tools(),
                    contract=contract,
                    network=_network_name(tenant),
                    bind=self.bind,
                    labels={INSTANCE_LABEL: key, "org.gpu-console.config": wanted},
                )
                meta["stage"] = "container_started"
                self._save_meta(paths, meta)
                try:
                    self.podman.run(*argv, timeout=120)
                except PodmanError as exc:
                    self.podman.remove(name)
                    raise LocalRuntimeError(f"the container could not start: {exc}") from exc
            elif info.get("State", {}).get("Status") != "running":
                try:
                    self.podman.run("start", name, timeout=60)
                except PodmanError as exc:
                    raise LocalRuntimeError(f"the container could not start: {exc}") from exc
            self._userns_verify(key, meta)
            meta.update(should_run=True, started=time.time(), oom_seen=self._oom_kills(key))
            meta["stage"] = "container_started"
            self._save_meta(paths, meta)
            return {
                "version": STATE_VERSION,
                "engine": self.engine,
                "ports": ports,
                "dir": str(paths.base),
                "login_user": LOGIN_USER,
                "image": meta["image"],
                "mounts": [
                    {"path": m["path"], "read_only": m["read_only"], "enforced": True} for m in meta.get("mounts", [])
                ],
            }

    def _meta_update(
        self,
        key,
        paths,
        meta,
        *,
        owner_ref,
        gpus,
        ssh_public_keys,
        mounts,
        tenant,
        image,
        cpus,
        memory_gb,
        disk_gb,
        app=...,
    ) -> dict:
        paths.base.mkdir(parents=True, exist_ok=True)
        os.chmod(paths.base, 0o700)
        if not meta:
            meta = {
                "key": key,
                "created": time.time(),
                "secrets": {LAB: secrets.token_urlsafe(32), CODE: secrets.token_hex(32)},
                "tenant": dict(tenant),
                "image": image or self.default_image,
                "limits": asdict(limits_for(cpus=cpus, memory_gb=memory_gb, options=self.limit_options)),
                "disk_gb": int(disk_gb or self.limit_options.get("DEFAULT_DISK_GB") or 10),
            }
        elif tenant and int(dict(tenant)["uid_base"]) != int(meta["tenant"]["uid_base"]):
            raise LocalRuntimeError("this instance belongs to another tenant's uid range")
        cards = [str(g) for g in gpus]
        meta.update(
            owner_ref=owner_ref or meta.get("owner_ref", ""),
            gpus=cards,
            gpu_devices=_gpu_devices(cards, self.cdi_spec_dirs),
            ssh_public_keys=list(ssh_public_keys) or meta.get("ssh_public_keys", []),
            mounts=[asdict(m) for m in mounts] if mounts is not None else meta.get("mounts", []),
            login_user=LOGIN_USER,
        )
        if app is not ...:
            meta["app"] = dict(app) if app else None
        meta["secrets"].setdefault(APP, secrets.token_urlsafe(32))
        for mount in meta["mounts"]:
            _check_mount_path(mount["path"])
        self._save_meta(paths, meta)
        return meta

    def _config_digest(self, meta: dict, ports: Mapping[str, int]) -> str:
        what = json.dumps(
            [
                meta["image"],
                meta["limits"],
                meta.get("mounts"),
                meta.get("gpu_devices"),
                dict(ports),
                self.public_mounts,
            ],
            sort_keys=True,
        )
        return hashlib.sha256(what.encode()).hexdigest()[:16]

    def _tools(self) -> dict[str, str]:
        tools = {"console-start": str(PROJECT_ROOT / "images/contract/console-start")}
        tini = shutil.which("tini-static")
        if tini:
            tools["tini"] = tini
        if CODE in self.services and Path(self.code_server_dir).is_dir() and self.node_bin:
            tools["code-server"] = self.code_server_dir
            tools["node"] = self.node_bin
        return tools

    def _follows_contract(self, image: str) -> bool:
        info = self.podman.inspect("image", image) or {}
        labels = (info.get("Config") or {}).get("Labels") or info.get("Labels") or {}
        return labels.get(CONTRACT_LABEL) == "1"

    def _network_ensure(self, tenant: Mapping) -> None:
        network = _network_name(tenant)
        if self.podman.run("network", "exists", network, check=False).returncode == 0:
            return
        result = self.podman.run("network", "create", "--opt", "isolate=true", network, check=False)
        if result.returncode != 0 and self.podman.run("network", "exists", network, check=False).returncode != 0:
            raise LocalRuntimeError(f"the tenant's network could not be made: {last_words(result.stderr)}")

    # --- the image --------------------------------------------------------------------------------

    def _image_ready(self, key: str, paths: ContainerPaths, meta: dict) -> None:
        """Pull the image unless it is here; poll() reads the pull's progress from its log meanwhile."""
        image = meta["image"]
        if self.podman.image_exists(image):
            meta.pop("boot_error", None)
            meta["stage"] = "image_ready"
            self._save_meta(paths, meta)
            return
        if "/" not in image.split("@")[0]:
            raise LocalRuntimeError(f"the image {image} is not on this host and names no registry")
        log = paths.run / "pull.log"
        sizes = self._layer_sizes(image)
        meta.update(stage="pulling", pull={"log": str(log), "layers": sizes, "started": time.time()})
        self._save_meta(paths, meta)
        args = ["pull"]
        if (
            _registry_of(image) in self.registries_insecure
            or _registry_of(image).split(":")[0] in self.registries_insecure
        ):
            args.append("--tls-verify=false")
        process = self.podman.popen([*args, image], log=log, tmpdir=paths.run / "pull-tmp")
        try:
            returncode = process.wait(timeout=1800)
        except subprocess.TimeoutExpired:
            process.kill()
            returncode = -1
        if returncode != 0:
            meta.pop("pull", None)
            said = last_words(log.read_text(errors="replace")) if log.exists() else ""
            why = f"the image {image} could not be pulled: {said or 'podman pull failed'}"
            # poll() reads it: the boot cannot succeed, whichever worker asks (BOOT_FAILED).
            meta.update(stage=BOOT_FAILED, boot_error=why)
            self._save_meta(paths, meta)
            raise LocalRuntimeError(why)
        meta.pop("pull", None)
        meta.pop("boot_error", None)
        meta["stage"] = "image_ready"
        self._save_meta(paths, meta)
        shutil.rmtree(paths.run / "pull-tmp", ignore_errors=True)

    def _layer_sizes(self, image: str) -> dict[str, int]:
        """``{digest: size}`` of the image's layers, from its manifest (skopeo), for pull progress."""
        args = ["inspect", "--raw"]
        if _registry_of(image).split(":")[0] in self.registries_insecure:
            args.append("--tls-verify=false")
        try:
            result = subprocess.run(  # noqa: S603
                ["skopeo", *args, f"docker://{image}"],  # noqa: S607
                capture_output=True,
                text=True,
                timeout=30,
                env=self.podman.env(),
                check=False,
            )
            manifest = json.loads(result.stdout) if result.returncode == 0 else {}
        except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError):
            manifest = {}
        return {
            layer["digest"]: int(layer.get("size") or 0) for layer in manifest.get("layers") or () if "digest" in layer
        }

    # --- the home volume (disk_gb) and the secrets folder -----------------------------------------

    def _home_mount(self, paths: ContainerPaths, meta: dict) -> None:
        """The instance's disk: an ext4 file of ``disk_gb`` loop-mounted at ``home/``, owned by the
        tenant's uid 1000. Made once; a larger ``disk_gb`` later grows it."""
        owner = int(meta["tenant"]["uid_base"]) + CONTAINER_UID
        size = int(meta["disk_gb"]) * 2**30
        if not paths.home_image.exists():
            with open(paths.home_image, "wb") as handle:
                handle.truncate(size)
            os.chmod(paths.home_image, 0o600)
            _run_checked(
                [
                    "mkfs.ext4",
                    "-q",
                    "-F",
                    "-m",
                    "0",
                    "-E",
                    f"lazy_itable_init=1,lazy_journal_init=1,root_owner={owner}:{owner}",
                    str(paths.home_image),
                ],
                "the instance's disk could not be made",
            )
        paths.home.mkdir(exist_ok=True)
        if not os.path.ismount(paths.home):
            _run_checked(
                ["mount", "-o", "loop,nodev,nosuid", str(paths.home_image), str(paths.home)],
                "the instance's disk could not be mounted",
            )
        lost = paths.home / "lost+found"
        if lost.is_dir():
            with contextlib.suppress(OSError):
                lost.rmdir()
        info = os.stat(paths.home)
        if (info.st_uid, info.st_gid) != (owner, owner):
            os.chown(paths.home, owner, owner)
        os.chmod(paths.home, 0o700)

    def _home_unmount(self, paths: ContainerPaths) -> None:
        if not (paths.home.exists() and os.path.ismount(paths.home)):
            return
        if subprocess.run(["umount", str(paths.home)], capture_output=True, check=False).returncode != 0:  # noqa: S603,S607
            subprocess.run(["umount", "-l", str(paths.home)], capture_output=True, check=False)  # noqa: S603,S607

    def _secrets_write(self, key: str, paths: ContainerPaths, meta: dict, ports: Mapping[str, int]) -> None:
        owner = int(meta["tenant"]["uid_base"]) + CONTAINER_UID
        folder = paths.secrets
        folder.mkdir(exist_ok=True)
        gpus = meta.get("gpus") or []
        visible = ",".join(str(i) for i in range(len(gpus))) if meta.get("gpu_devices") else ",".join(gpus)
        settings = {
            "CONSOLE_SERVICES": " ".join(self.servers_of(meta)),
            "CONSOLE_LAB_BASE_URL": self.base_url(key, LAB),
            "CONSOLE_LAB_PORT": str(CONTAINER_PORTS[LAB]),
            "CONSOLE_CODE_PORT": str(CONTAINER_PORTS[CODE]),
            "CONSOLE_SSH_PORT": str(CONTAINER_PORTS[SSH]),
            "CONSOLE_GPUS": visible,
        }
        files = {
            "console.env": "".join(f"{k}='{v}'\n" for k, v in settings.items()),
            "lab_token": meta["secrets"][LAB] + "\n",
            "code_secret": meta["secrets"][CODE] + "\n",
            "authorized_keys": "".join(k.strip() + "\n" for k in meta.get("ssh_public_keys", []) if k.strip()),
        }
        for service in (APP, WEBUI):
            if service in self.servers_of(meta):
                files[f"{service}.sh"] = self._app_script(key, meta, service)
        stale = {f"{service}.sh" for service in (APP, WEBUI)} - set(files)
        os.chmod(folder, 0o700)
        os.chown(folder, 0, 0)
        for name in stale:  # an app no longer run
            with contextlib.suppress(FileNotFoundError):
                (folder / name).unlink()
        for name, text in files.items():
            target = folder / name
            tmp = folder / f".{name}.tmp"
            tmp.write_text(text)
            os.chown(tmp, owner, owner)
            os.chmod(tmp, 0o400)
            os.replace(tmp, target)
        os.chown(folder, owner, owner)
        os.chmod(folder, 0o500)
        if SSH in self.services:
            self._hostkey_ensure(key, paths, meta)

    def servers_of(self, meta: dict | None) -> tuple[str, ...]:
        """The servers this instance runs: the configured entry points, plus its app (and the app's
        WebUI) when it has one."""
        app = (meta or {}).get("app") or {}
        return self.services + ((APP,) if app else ()) + ((WEBUI,) if app.get("webui") else ())

    def _app_script(self, key: str, meta: dict, service: str) -> str:
        """The app's (or its WebUI's) start command as a shell script ``console-start`` runs as the
        user: the placeholders filled in for the container (``{host}`` 0.0.0.0, ``{port}`` the app's
        port in its image), its environment, and ``APP_API_KEY``, the secret the proxy sends as a
        Bearer token. It lives in the secrets folder, so a saved image never keeps the key."""
        app = meta["app"]
        command = servers.app_command(
            paths=servers.Paths(Path(HOME_PATH)),
            port=int(app.get("port") or 8000),
            base_path=self.base_url(key, service),
            app=app if service == APP else app["webui"],
            secret=meta["secrets"][APP],
            webui_port=int(app["webui"].get("port") or 8080) if app.get("webui") else None,
            name=service,
            host="0.0.0.0",  # noqa: S104 (inside the container, on its own network only)
        )
        lines = ["# Written by the console: the app's start command (secrets folder, read-only)."]
        lines += [f"export {name}={shlex.quote(value)}" for name, value in sorted(command.env.items())]
        lines.append("exec " + shlex.join(command.argv))
        return "\n".join(lines) + "\n"

    def _app_port(self, meta: dict, service: str) -> int:
        app = meta.get("app") or {}
        part = app if service == APP else (app.get("webui") or {})
        return int(part.get("port") or (8000 if service == APP else 8080))

    def _hostkey_ensure(self, key: str, paths: ContainerPaths, meta: dict) -> None:
        """The sshd's host key, made once per instance on the host and mounted read-only for the
        container's root only (not uid 1000): the same key after every start, so the SSH gateway's
        pin holds, and never part of the image (a bind mount is not saved by a commit)."""
        folder = paths.hostkeys
        private = folder / "ssh_host_ed25519_key"
        root = int(meta["tenant"]["uid_base"])
        if not private.exists():
            folder.mkdir(exist_ok=True)
            os.chmod(folder, 0o700)
            _run_checked(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"instance-{key}", "-f", str(private)],
                "the instance's SSH host key could not be made",
            )
        for path in (private, private.with_suffix(".pub")):
            os.chown(path, root, root)
        os.chmod(private, 0o400)
        os.chown(folder, root, root)
        os.chmod(folder, 0o500)

    # --- checks after start -----------------------------------------------------------------------

    def address(self, key: str) -> str | None:
        """The container's address on its tenant's network, while it runs (None otherwise).

        Rootful podman's bridge reaches it from this host, so the console's proxy serves any port the
        owner's programs listen on there (declared at any time, never published); other tenants'
        containers cannot, their networks being isolated from this one."""
        meta = self.meta(key)
        info = self.podman.inspect("container", self.container_name(key)) if meta else None
        if not info or (info.get("State") or {}).get("Status") != "running":
            return None
        networks = (info.get("NetworkSettings") or {}).get("Networks") or {}
        own = networks.get(_network_name(meta["tenant"])) or {}
        return own.get("IPAddress") or None

    def container_pid(self, key: str) -> int | None:
        info = self.podman.inspect("container", self.container_name(key)) or {}
        pid = int((info.get("State") or {}).get("Pid") or 0)
        return pid or None

    def _userns_verify(self, key: str, meta: dict) -> None:
        pid = self.container_pid(key)
        tenant = meta["tenant"]
        try:
            uid_map = Path(f"/proc/{pid}/uid_map").read_text() if pid else ""
        except OSError:
            uid_map = ""
        if not pid:
            state = (self.podman.inspect("container", self.container_name(key)) or {}).get("State") or {}
            logs = self.logs(key)
            raise LocalRuntimeError(
                f"the container stopped at once (exit status {state.get('ExitCode', '?')}): {_last_lines(logs) or 'no output'}"
            )
        why = uid_map_check(uid_map, uid_base=int(tenant["uid_base"]), uid_count=int(tenant["uid_count"]))
        if why:
            self.podman.remove(self.container_name(key))
            raise LocalRuntimeError(f"the instance was not isolated, so it was stopped: {why}")

    def logs(self, key: str, lines: int = 20) -> str:
        result = self.podman.run("logs", "--tail", str(lines), self.container_name(key), check=False)
        return (result.stdout + result.stderr).strip()

    def _cgroup_memory_dir(self, key: str) -> Path | None:
        pid = self.container_pid(key)
        if not pid:
            return None
        try:
            for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
                _id, controllers, path = line.split(":", 2)
                if "memory" in controllers.split(","):
                    return Path("/sys/fs/cgroup/memory") / path.lstrip("/")
                if controllers == "" and Path("/sys/fs/cgroup/cgroup.controllers").exists():
                    return Path("/sys/fs/cgroup") / path.lstrip("/")
        except (OSError, ValueError):
            return None
        return None

    def _oom_kills(self, key: str) -> int:
        """How many processes the kernel killed in the container for want of memory (its cgroup's count)."""
        folder = self._cgroup_memory_dir(key)
        if folder is None:
            return 0
        for name in ("memory.oom_control", "memory.events"):
            try:
                text = (folder / name).read_text()
            except OSError:
                continue
            match = re.search(r"^oom_kill (\d+)$", text, flags=re.M)
            if match:
                return int(match.group(1))
        return 0

    def oom_acknowledge(self, key: str) -> None:
        with self._lock(key):
            meta = self.meta(key)
            if meta is not None:
                meta["oom_seen"] = self._oom_kills(key)
                self._save_meta(self.paths(key), meta)

    # --- observe ----------------------------------------------------------------------------------

    def status(self, key: str) -> InstanceStatus:
        meta = self.meta(key)
        if meta is None:
            return InstanceStatus(key=key, exists=False)
        info = self.podman.inspect("container", self.container_name(key))
        state = (info or {}).get("State") or {}
        ports = self.ports.get(key)
        servers_: dict[str, ServerStatus] = {}
        running = state.get("Status") == "running"
        booting = "should_run" not in meta  # its first start is under way (the image pulled, the container made)
        address = None
        for service in self.servers_of(meta):
            port = ports.get(service)
            if service in (APP, WEBUI):
                address = address or ((info or {}).get("NetworkSettings") or {}).get("Networks", {}).get(
                    _network_name(meta["tenant"]), {}
                ).get("IPAddress")
                port = self._app_port(meta, service) if address else None
            if booting and not running:
                servers_[service] = ServerStatus(service, ServerState.STARTING, port)
            elif running and port:
                up = self._answers(key, service, port, meta)
                servers_[service] = ServerStatus(service, ServerState.RUNNING if up else ServerState.STARTING, port)
            elif meta.get("should_run") and info is not None and state.get("Status") in ("exited", "stopped"):
                detail = f"exit status {state.get('ExitCode')}" + (" (out of memory)" if state.get("OOMKilled") else "")
                servers_[service] = ServerStatus(
                    service, ServerState.CRASHED, port, detail=_last_lines(self.logs(key)) or detail
                )
            else:
                servers_[service] = ServerStatus(service, ServerState.STOPPED, port)
        return InstanceStatus(key=key, exists=True, servers=servers_)

    def _answers(self, key: str, service: str, port: int, meta: dict) -> bool:
        host = "127.0.0.1" if self.bind in ("0.0.0.0", "::") else self.bind  # noqa: S104 (a comparison)
        if service in (APP, WEBUI):  # not published: on the container's own address, serving (not just listening)
            part = (meta.get("app") or {}) if service == APP else ((meta.get("app") or {}).get("webui") or {})
            base = self.base_url(key, service).rstrip("/") if part.get("serves_base_path", True) else ""
            address = self.address(key)
            return bool(address) and _answers(port, base + (part.get("health_path") or "/"), host=address)
        if service == LAB:
            connection = http.client.HTTPConnection(host, port, timeout=2)
            try:
                connection.request(
                    "GET",
                    f"{self.base_url(key, LAB)}api/status",
                    headers={"Authorization": f"token {meta['secrets'][LAB]}", "User-Agent": "console-readiness"},
                )
                return connection.getresponse().status == 200
            except (OSError, http.client.HTTPException):
                return False
            finally:
                connection.close()
        try:
            with socket.create_connection((host, port), timeout=1) as sock:
                if service == SSH:
                    sock.settimeout(2)
                    return sock.recv(4).startswith(b"SSH-")
                return True
        except OSError:
            return False

    def out_of_memory(self, key: str) -> int:
        """Processes killed for want of memory since the last start or acknowledgement."""
        meta = self.meta(key) or {}
        return max(0, self._oom_kills(key) - int(meta.get("oom_seen") or 0))

    def boot_error(self, key: str) -> str:
        """Why the instance's boot failed (its image could not be pulled), "" when it did not."""
        meta = self.meta(key) or {}
        return meta.get("boot_error", "") if meta.get("stage") == BOOT_FAILED else ""

    def cached_images(self) -> tuple[str, ...]:
        """The images this host holds, as the console's catalogue names them: each image's digests
        (what a launch pins) and the slugs ``IMAGES`` maps to an image that is here."""
        result = self.podman.run("images", "--format", "json", check=False, timeout=60)
        try:
            images = json.loads(result.stdout or "[]") if result.returncode == 0 else []
        except json.JSONDecodeError:
            images = []
        held: set[str] = set()
        names: set[str] = set()
        for image in images:
            digests = [image.get("Digest") or ""] + [ref.rpartition("@")[2] for ref in image.get("RepoDigests") or ()]
            held.update(d for d in digests if d.startswith("sha256:"))
            names.update(image.get("Names") or ())
            names.update(image.get("RepoDigests") or ())
        held.update(slug for slug, ref in self.images.items() if slug != "default" and ref in names)
        return tuple(sorted(held))

    def stage(self, key: str) -> tuple[str, int, int]:
        """(stage, bytes pulled, bytes in all) while the instance boots."""
        meta = self.meta(key) or {}
        pull = meta.get("pull")
        if meta.get("stage") == "pulling" and pull:
            try:
                text = Path(pull["log"]).read_text(errors="replace")
            except OSError:
                text = ""
            layers = pull.get("layers") or {}
            downloaded = _folder_bytes(self.paths(key).run / "pull-tmp")
            return "pulling", pull_progress(text, layers, downloaded), sum(layers.values())
        return meta.get("stage", ""), 0, 0

    def upstream(self, key: str, service: str) -> Upstream | None:
        meta = self.meta(key)
        if meta and service in (APP, WEBUI) and service in self.servers_of(meta):
            address = self.address(key)
            if not address:
                return None
            return Upstream(
                host=address, port=self._app_port(meta, service), service=service, secret=meta["secrets"][APP]
            )
        port = self.ports.get(key).get(service) if meta else None
        if not meta or port is None or service not in (LAB, CODE):
            return None
        return Upstream(
            host="127.0.0.1" if self.bind in ("0.0.0.0", "::") else self.bind,  # noqa: S104 (a comparison)
            port=port,
            service=service,
            secret=meta["secrets"][service],
        )

    def host_key(self, key: str) -> str:
        """The sshd's public host key ("" before the first start)."""
        with contextlib.suppress(OSError, LocalRuntimeError):
            return (self.paths(key).hostkeys / "ssh_host_ed25519_key.pub").read_text().strip()
        return ""

    def idle_seconds(self, key: str, *, gpu_busy: bool = False, now: float | None = None) -> int | None:
        """Seconds since the instance started, or since JupyterLab's last activity (None when gone);
        0 while a GPU of its is busy or a kernel executes."""
        meta = self.meta(key)
        if meta is None:
            return None
        now = time.time() if now is None else now
        last = float(meta.get("started") or meta.get("created") or now)
        upstream = self.upstream(key, LAB)
        if upstream is not None:
            status = _get_json(upstream.port, f"{self.base_url(key, LAB)}api/status", upstream.secret)
            kernels = _get_json(upstream.port, f"{self.base_url(key, LAB)}api/kernels", upstream.secret) or []
            if any(isinstance(k, dict) and k.get("execution_state") == "busy" for k in kernels):
                gpu_busy = True
            stamp = _timestamp((status or {}).get("last_activity"))
            if stamp:
                last = max(last, stamp)
        if gpu_busy:
            return 0
        return max(0, int(now - last))

    def processes(self, key: str) -> list[int]:
        """The host pids of the instance's processes (empty when its container does not run)."""
        result = self.podman.run("top", self.container_name(key), "hpid", check=False)
        if result.returncode != 0:
            return []
        return [int(word) for word in result.stdout.split() if word.isdigit()]

    # --- stop and destroy -------------------------------------------------------------------------

    def stop(self, key: str) -> None:
        """Stop the container (every process of it) and free its GPUs; the disk and writable layer stay."""
        paths = self.paths(key)
        with self._lock(key):
            meta = self.meta(key)
            if meta is not None:
                meta["should_run"] = False
                self._save_meta(paths, meta)
            name = self.container_name(key)
            if self.podman.container_exists(name):
                result = self.podman.run("stop", "-t", f"{self.stop_timeout:g}", name, check=False)
                if result.returncode != 0:
                    self.podman.remove(name)  # a stop that failed: remove it (the disk is the home volume)
            self._home_unmount(paths)
            # Its ports stay its own while it is stopped, so `podman start` finds them free; its cards
            # go back (a start on other cards makes a new container, same disk).
            self.gpus.release(key)

    def restart(self, key: str, *, mounts: Sequence[Mount] | None = None, app=...) -> dict:
        meta = self.meta(key)
        if meta is None:
            raise LocalRuntimeError(f"no instance {key!r} on this host")
        with self._lock(key):
            self.podman.remove(self.container_name(key))
        return self.start(
            key,
            owner_ref=meta.get("owner_ref", ""),
            gpus=meta.get("gpus", []),
            ssh_public_keys=meta.get("ssh_public_keys", []),
            mounts=mounts,
            app=app,
        )

    def destroy(self, key: str) -> None:
        """Remove the container and delete the instance's disk and folder. Already gone is done."""
        paths = self.paths(key)
        with self._lock(key):
            self.podman.remove(self.container_name(key))
            self.ports.release(key)
            self.gpus.release(key)
            self._home_unmount(paths)
            if paths.home.exists() and os.path.ismount(paths.home):
                raise LocalRuntimeError("the instance's disk is still mounted; try again")
            shutil.rmtree(paths.base, ignore_errors=True)
        (self.root / ".locks" / f"{key}.lock").unlink(missing_ok=True)

    # --- volumes (directories on this host, bind-mounted with the tenant's ownership) --------------

    @property
    def volumes_root(self) -> Path:
        return self.root / "volumes"

    def volume_path(self, key: str) -> Path:
        if not key or "/" in key or key.startswith(".") or len(key) > 64:
            raise LocalRuntimeError(f"invalid volume key {key!r}")
        return self.volumes_root / key

    def volume_create(self, key: str) -> Path:
        path = self.volume_path(key)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def volume_destroy(self, key: str) -> None:
        shutil.rmtree(self.volume_path(key), ignore_errors=True)

    def volume_usage(self, key: str) -> int | None:
        path = self.volume_path(key)
        return _disk_usage(path) if path.is_dir() else None

    def volume_own(self, source: str, tenant: Mapping) -> None:
        """Give a volume to the tenant's uid 1000 (the first time it is attached to one of its machines)."""
        owner = int(tenant["uid_base"]) + CONTAINER_UID
        info = os.stat(source)
        if info.st_uid == owner:
            return
        for folder, dirs, files in os.walk(source):
            for name in [*dirs, *files]:
                with contextlib.suppress(OSError):
                    os.lchown(os.path.join(folder, name), owner, owner)
        os.chown(source, owner, owner)


def _gpu_devices(cards: Sequence[str], spec_dirs: Sequence[str]) -> list[str]:
    try:
        return cdi_devices(cards, spec_dirs=spec_dirs)
    except CdiError as exc:
        raise LocalRuntimeError(str(exc)) from exc


def _folder_bytes(folder: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def _network_name(tenant: Mapping) -> str:
    return f"console-t{int(tenant['uid_base'])}"


def _registry_of(image: str) -> str:
    first = image.split("/", 1)[0]
    return first if "/" in image and ("." in first or ":" in first or first == "localhost") else "docker.io"


def _run_checked(argv: list[str], what: str) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
    if result.returncode != 0:
        raise LocalRuntimeError(f"{what}: {last_words(result.stderr) or result.returncode}")


def _last_lines(text: str, lines: int = 3, limit: int = 300) -> str:
    kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    joined = " / ".join(kept)
    return joined if len(joined) <= limit else "…" + joined[-limit:]


def _get_json(port: int, path: str, token: str):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        connection.request("GET", path, headers={"Authorization": f"token {token}", "User-Agent": "console-idle-check"})
        response = connection.getresponse()
        return json.loads(response.read()) if response.status == 200 else None
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        connection.close()


def _timestamp(value) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
