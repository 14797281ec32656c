"""The container as podman is asked to run it: the image contract's paths inside it, the limits capped to
this host, the ``podman run`` argv (uid map, limits, dropped capabilities, ports on loopback, mounts,
CDI GPUs), the check of the user namespace it got, and an image pull's progress. Pure: no podman call,
so the tests check every argument without a container (the download folder's size aside).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from providers.local.runtime import servers
from providers.local.runtime.base import (
    LocalRuntimeError,
    Mount,
)
from providers.local.runtime.cdi import CdiError, cdi_devices
from providers.local.runtime.podman import PROJECT_ROOT
from providers.local.runtime.servers import CODE, LAB, SSH

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


def server_answers(*, service: str, host: str, port: int, lab_url: str, lab_token: str) -> bool:
    """Whether a contract server published at ``host:port`` answers as itself: JupyterLab's status with
    its token (``lab_url`` is its base URL), sshd's banner, or any server accepting a connection."""
    if service == LAB:
        connection = http.client.HTTPConnection(host, port, timeout=2)
        try:
            connection.request(
                "GET",
                f"{lab_url}api/status",
                headers={"Authorization": f"token {lab_token}", "User-Agent": "console-readiness"},
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


def contract_tools(*, services: Sequence[str], code_server_dir: str, node_bin: str) -> dict[str, str]:
    """What the console mounts read-only under /opt/console for every image (``run_argv``'s ``tools``):
    the contract's start script, the Python hook that links W&B runs, the host's static tini when it
    has one, and code-server with its node when the instance serves VS Code."""
    tools = {
        "console-start": str(PROJECT_ROOT / "images/contract/console-start"),
        "python": str(PROJECT_ROOT / "images/contract/python"),
    }
    tini = shutil.which("tini-static")
    if tini:
        tools["tini"] = tini
    if CODE in services and Path(code_server_dir).is_dir() and node_bin:
        tools["code-server"] = code_server_dir
        tools["node"] = node_bin
    return tools


def run_argv(
    *,
    name: str,
    image: str,
    tenant: Mapping,
    limits: Limits | None,
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
    userns: Sequence[str] | None = None,
    lifetime: Sequence[str] = (),
) -> list[str]:
    """The ``podman run`` arguments of one instance (pure, so a test reads exactly what would run).

    ``tools``: host paths mounted read-only under /opt/console (``console-start``, ``code-server``,
    ``node``, ``tini``). ``contract``: the image follows the contract; otherwise the console's start
    script is the entrypoint, under the host's static tini. ``userns``: the user namespace's arguments
    in place of the tenant's range (rootless podman maps the caller's own subordinate range: a Slurm
    job). ``limits`` None: podman sets none, the caller's cgroup holds them (rootless podman on cgroup
    v1 cannot set any: Slurm's job cgroup does). ``lifetime``: ``--rm --replace`` for a container that
    lives and dies with its caller."""
    if userns is None:
        uid_base, uid_count = int(tenant["uid_base"]), int(tenant["uid_count"])
        userns = ["--uidmap", f"0:{uid_base}:{uid_count}", "--gidmap", f"0:{uid_base}:{uid_count}"]
    argv = [
        "run",
        "-d",
        *lifetime,
        "--name",
        name,
        "--hostname",
        name.removeprefix("console-")[:12] or "instance",
        *userns,
    ]
    if limits is not None:
        memory = f"{int(limits.memory_gb * 1024)}m"
        argv += [
            "--cpus",
            f"{limits.cpus:g}",
            "--memory",
            memory,
            "--memory-swap",
            memory,  # no swap beyond the limit: an allocation over it is killed, not paged out
            "--pids-limit",
            str(limits.pids),
        ]
    argv += [
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


def _gpu_devices(cards: Sequence[str], spec_dirs: Sequence[str]) -> list[str]:
    try:
        return cdi_devices(cards, spec_dirs=spec_dirs)
    except CdiError as exc:
        raise LocalRuntimeError(str(exc)) from exc


def _network_name(tenant: Mapping) -> str:
    return f"console-t{int(tenant['uid_base'])}"


def _folder_bytes(folder: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def _registry_of(image: str) -> str:
    first = image.split("/", 1)[0]
    return first if "/" in image and ("." in first or ":" in first or first == "localhost") else "docker.io"
