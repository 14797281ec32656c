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

import base64
import contextlib
import hashlib
import json
import logging
import os
import re
import secrets
import shlex
import shutil
import subprocess
import tarfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

import httpx

from providers.local.runtime import firewall as firewall_rules
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
from providers.local.runtime.container_files import (
    USER_ENV_FILE,
    USER_SECRET_NAME,
    home_mount,
    home_unmount,
    hostkey_ensure,
    secrets_folder_clear_user,
    secrets_folder_write,
    user_secret_files,
)
from providers.local.runtime.container_spec import (
    CONTAINER_PORTS,
    CONTAINER_UID,
    CONTRACT_LABEL,
    DEFAULT_IMAGE,
    HOME_PATH,
    INSTANCE_LABEL,
    LOGIN_USER,
    ContainerPaths,
    Limits,
    _check_mount_path,
    _folder_bytes,
    _gpu_devices,
    _network_name,
    _registry_of,
    contract_tools,
    limits_for,
    pull_progress,
    run_argv,
    server_answers,
    uid_map_check,
)
from providers.local.runtime.image_recipe import layer_read, recipe_derive
from providers.local.runtime.image_save import (
    ImageSaveError,
    layout_fix,
    manifest_with_layer,
    pulled_bytes,
    upper_layer_write,
)
from providers.local.runtime.oci_push import PushUnsupported, Registry, split_reference
from providers.local.runtime.podman import PROJECT_ROOT, Podman, PodmanError, last_words
from providers.local.runtime.servers import APP, CODE, LAB, SSH, WEBUI

STATE_VERSION = 2
logger = logging.getLogger(__name__)
BOOT_FAILED = "failed"  # providers.base.BOOT_FAILED: a boot that cannot succeed


class ContainerRuntime(RuntimeBase):
    """Start, stop, observe and destroy instances as podman containers (see the module's docstring)."""

    engine = "podman"
    paths_class = ContainerPaths
    key_pattern = r"[\w.-]+"  # also a container's and a network's name

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
        firewall: bool = True,
        egress_deny: Sequence[str] = firewall_rules.DEFAULT_EGRESS_DENY,
    ) -> None:
        super().__init__(
            root=root,
            services=tuple(s for s in services if s in CONTAINER_PORTS),
            port_low=port_low,
            port_high=port_high,
            url_prefix=url_prefix,
            stop_timeout=stop_timeout,
            public_mounts=public_mounts,
            bind=bind,
        )
        self.podman = podman or Podman()
        self.images = dict(images or {})
        self.default_image = default_image
        self.limit_options = dict(limits or {})
        self.code_server_dir = code_server_dir or str(PROJECT_ROOT / "var/local-deps/code-server")
        self.node_bin = node_bin or shutil.which("node") or ""
        self.cdi_spec_dirs = tuple(cdi_spec_dirs)
        self.registries_insecure = tuple(registries_insecure)
        self.firewall = firewall
        self.egress_deny = firewall_rules.egress_deny_valid(egress_deny)

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

    @staticmethod
    def container_name(key: str) -> str:
        return f"console-{key}"

    def _save_meta(self, paths: ContainerPaths, meta: dict) -> None:
        paths.run.mkdir(parents=True, exist_ok=True)
        os.chmod(paths.run, 0o700)  # out of the tenant's reach: nothing under run/ is mounted anywhere
        super()._save_meta(paths, meta)

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
        user_secrets: Sequence[Mapping] | None = None,
        registry_login: Mapping | None = None,
    ) -> dict:
        """Create the instance's container (or find it) and run it; returns the state to persist.

        The first start needs ``tenant`` (a ``providers.base.Tenant`` as a dict) and ``image``; later
        ones take them from the instance's metadata. ``mounts`` replaces its volumes (None keeps
        them): a change of volumes makes a new container (the disk is the home volume, kept).
        ``user_secrets`` (``{"name", "value", "env"}`` each) are the owner's secrets for this boot,
        written to the secrets folder only, never to the metadata; None keeps the ones written.
        ``registry_login`` (``{"host", "username", "password"}``): how to pull a private image, used for
        the pull only (``_image_ready``)."""
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
            home_mount(paths, meta)
            ports = self.ports.allocate(key, list(self.services))
            self._secrets_write(key, paths, meta, ports, user_secrets)
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
                self._image_ready(key, paths, meta, login=registry_login)
                contract = self._follows_contract(meta["image"])
                self._network_ensure(tenant)
                self._fence(tenant, paths, meta)
                meta.pop("limits_now", None)  # a new container has the limits it is created with
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
                self._fence(tenant, paths, meta)
                try:
                    self.podman.run("start", name, timeout=60)
                except PodmanError as exc:
                    raise LocalRuntimeError(f"the container could not start: {exc}") from exc
            self._userns_verify(key, meta)
            self._limits_apply(name, meta)
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
        elif cpus or memory_gb:
            # A later start with figures of its own (a run without GPU, cards again after one): the
            # container keeps the limits it was created with ("limits", in its config digest, so the
            # writable layer survives) and is updated to these once it runs (``_limits_apply``).
            meta["limits_wanted"] = asdict(limits_for(cpus=cpus, memory_gb=memory_gb, options=self.limit_options))
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
        return contract_tools(services=self.services, code_server_dir=self.code_server_dir, node_bin=self.node_bin)

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

    def _limits_apply(self, name: str, meta: dict) -> None:
        """Hold the running container to the limits this start asked for, when they differ from those it
        has (``podman update``: the cgroup's CPU quota and memory, no new container; the pids limit is
        the host's option, the same for every run, and podman 4.3 cannot update it)."""
        wanted = meta.get("limits_wanted") or meta["limits"]
        if wanted == meta.get("limits_now", meta["limits"]):
            return
        limits = Limits(**wanted)
        memory = f"{int(limits.memory_gb * 1024)}m"
        try:
            self.podman.run(
                "update", f"--cpus={limits.cpus}", f"--memory={memory}", f"--memory-swap={memory}", name, timeout=60,
            )  # fmt: skip
        except PodmanError as exc:
            self.podman.run("stop", "-t", "3", name, check=False)
            raise LocalRuntimeError(f"the container's limits could not be set, so it was stopped: {exc}") from exc
        meta["limits_now"] = wanted

    def network_subnets(self, network: str) -> list[firewall_rules.Subnet]:
        """The IPv4 subnets of podman network ``network``, which the firewall fences; a network without
        one cannot be fenced, so nothing runs on it."""
        info = self.podman.inspect("network", network) or {}
        subnets = [
            firewall_rules.Subnet(cidr=s["subnet"], gateway=s["gateway"])
            for s in info.get("subnets") or []
            if s.get("subnet") and s.get("gateway") and ":" not in s["subnet"]
        ]
        if not subnets:
            raise LocalRuntimeError(f"the tenant's network {network} has no IPv4 subnet to fence")
        return subnets

    def _fence(self, tenant: Mapping, paths: ContainerPaths, meta: dict) -> None:
        """The firewall's rules for the tenant's network (``firewall.py``), before its container runs:
        a container that could reach this host's services or the cloud's metadata never starts."""
        if not self.firewall:
            return
        network = _network_name(tenant)
        subnets = [firewall_rules.Subnet(**s) for s in meta.get("subnets", [])]
        if not subnets or meta.get("subnets_of") != network:
            subnets = self.network_subnets(network)
            meta.update(subnets=[{"cidr": s.cidr, "gateway": s.gateway} for s in subnets], subnets_of=network)
            self._save_meta(paths, meta)
        try:
            firewall_rules.ensure(subnets, deny=self.egress_deny)
        except (firewall_rules.FirewallError, OSError, subprocess.SubprocessError) as exc:
            raise LocalRuntimeError(f"the instance's firewall could not be set, so it was not started: {exc}") from exc

    # --- the image --------------------------------------------------------------------------------

    def _image_ready(self, key: str, paths: ContainerPaths, meta: dict, *, login: Mapping | None = None) -> None:
        """Pull the image unless it is here; poll() reads the pull's progress from its log meanwhile.
        ``login``: the owner's login to a private image's registry, written to an auth file (mode 600,
        in the instance's private run folder) for this pull only and removed after it."""
        image = meta["image"]
        if self.podman.image_exists(image):
            meta.pop("boot_error", None)
            meta["stage"] = "image_ready"
            self._save_meta(paths, meta)
            return
        if "/" not in image.split("@")[0]:
            raise LocalRuntimeError(f"the image {image} is not on this host and names no registry")
        auth_file = paths.run / "pull-auth.json"
        if login:
            paths.run.mkdir(parents=True, exist_ok=True)
            secret = base64.b64encode(f"{login['username']}:{login['password']}".encode()).decode()
            fd = os.open(auth_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                json.dump({"auths": {login["host"]: {"auth": secret}}}, out)
        try:
            self._image_pull(paths, meta, image, auth_file=str(auth_file) if login else "")
        finally:
            auth_file.unlink(missing_ok=True)

    def _image_pull(self, paths: ContainerPaths, meta: dict, image: str, *, auth_file: str) -> None:
        log = paths.run / "pull.log"
        sizes = self._layer_sizes(image, auth_file=auth_file)
        meta.update(stage="pulling", pull={"log": str(log), "layers": sizes, "started": time.time()})
        self._save_meta(paths, meta)
        args = ["pull"]
        if (
            _registry_of(image) in self.registries_insecure
            or _registry_of(image).split(":")[0] in self.registries_insecure
        ):
            args.append("--tls-verify=false")
        if auth_file:
            args += ["--authfile", auth_file]
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

    def _layer_sizes(self, image: str, *, auth_file: str = "") -> dict[str, int]:
        """``{digest: size}`` of the image's layers, from its manifest (skopeo), for pull progress."""
        args = ["inspect", "--raw"]
        if _registry_of(image).split(":")[0] in self.registries_insecure:
            args.append("--tls-verify=false")
        if auth_file:
            args += ["--authfile", auth_file]
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

    def _secrets_write(
        self,
        key: str,
        paths: ContainerPaths,
        meta: dict,
        ports: Mapping[str, int],
        user_secrets: Sequence[Mapping] | None = None,
    ) -> None:
        owner = int(meta["tenant"]["uid_base"]) + CONTAINER_UID
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
        if user_secrets is not None:
            files.update(user_secret_files(user_secrets))
        secrets_folder_write(paths.secrets, files, owner=owner, keep_user_secrets=user_secrets is None)
        if SSH in self.services:
            hostkey_ensure(key, paths, meta)

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
        return server_answers(
            service=service, host=host, port=port, lab_url=self.base_url(key, LAB), lab_token=meta["secrets"][LAB]
        )

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
            stamp, kernel_busy = jupyter_activity(upstream, self.base_url(key, LAB))
            gpu_busy = gpu_busy or kernel_busy
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
                conmon = ((self.podman.inspect("container", name) or {}).get("State") or {}).get("ConmonPid") or 0
                result = self.podman.run("stop", "-t", f"{self.stop_timeout:g}", name, check=False)
                if result.returncode != 0:
                    self.podman.remove(name)  # a stop that failed: remove it (the disk is the home volume)
                else:
                    _conmon_wait(int(conmon))
            home_unmount(paths)
            secrets_folder_clear_user(paths.secrets)  # the next start brings them again
            # Its ports stay its own while it is stopped, so `podman start` finds them free; its cards
            # go back (a start on other cards makes a new container, same disk).
            self.gpus.release(key)

    def restart(
        self, key: str, *, mounts: Sequence[Mount] | None = None, app=..., user_secrets: Sequence[Mapping] | None = None
    ) -> dict:
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
            user_secrets=user_secrets,
        )

    def destroy(self, key: str) -> None:
        """Remove the container and delete the instance's disk and folder. Already gone is done."""
        paths = self.paths(key)
        with self._lock(key):
            self.podman.remove(self.container_name(key))
            self.ports.release(key)
            self.gpus.release(key)
            home_unmount(paths)
            if paths.home.exists() and os.path.ismount(paths.home):
                raise LocalRuntimeError("the instance's disk is still mounted; try again")
            shutil.rmtree(paths.base, ignore_errors=True)
        (self.root / ".locks" / f"{key}.lock").unlink(missing_ok=True)

    # --- snapshots: the disk is home.img, mounted at home/ while it runs -------------------------------

    def disk_path(self, key: str) -> Path:
        return self.paths(key).home_image

    def disk_mountpoint(self, key: str) -> Path | None:
        return self.paths(key).home

    def _disk_in_use(self, key: str, meta: dict) -> bool:
        # Started and not stopped since (a stop writes should_run false and unmounts the disk, which the
        # copy checks as well): asking podman is not needed to know.
        return bool(meta.get("should_run"))

    # --- save as image ------------------------------------------------------------------------------

    def image_save(self, key: str, *, repository: str, tag: str, auth_file: str = "") -> dict:
        """Commit the instance's container (running or stopped) and push it to ``repository:tag``;
        returns ``{"digest", "size_bytes", "shifted", "dropped", "timings"}`` (see ``image_save``'s
        docstring; ``timings``: seconds of the commit, the copy out of the store, the fix and the push).

        Its disk (``/home/user``) and volumes are mounts, not the container's own layer: they are not
        in the image. What is: everything installed or changed outside them (apt, pip into the
        image's environment, files under ``/opt``, ``/etc``, ``/usr``…)."""
        skopeo = shutil.which("skopeo")
        if not skopeo:
            raise LocalRuntimeError("skopeo is not installed (run `make container-deps`)")
        with self._lock(key):
            meta = self.meta(key)
            name = self.container_name(key)
            if meta is None or not self.podman.container_exists(name):
                raise LocalRuntimeError("this instance has no container on this host to save")
            tenant = meta["tenant"]
            direct = self._image_save_direct(key, meta, repository=repository, tag=tag, auth_file=auth_file)
            if direct is not None:
                return direct
            original = self.podman.inspect("image", meta["image"]) or {}
            original_config = original.get("Config") or {}
            local = f"localhost/console-save/{key}:{tag}"
            scratch = self.paths(key).run / "image-save"
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir(parents=True)
            layout = scratch / "layout"
            timings: dict[str, float] = {}
            clock = time.monotonic()
            try:
                self.podman.run("commit", "--format", "oci", "--quiet", name, local, timeout=900)
                timings["commit_s"], clock = time.monotonic() - clock, time.monotonic()
                copy = [skopeo, "copy", "--quiet", f"containers-storage:{local}", f"dir:{layout}"]
                self._skopeo(copy, timeout=900)
                timings["copy_s"], clock = time.monotonic() - clock, time.monotonic()
                report = layout_fix(
                    layout,
                    uid_base=int(tenant["uid_base"]),
                    uid_count=int(tenant["uid_count"]),
                    secrets=self._secret_values(key, meta),
                    entrypoint=list(original_config.get("Entrypoint") or []),
                    cmd=list(original_config.get("Cmd") or []),
                )
                timings["fix_s"], clock = time.monotonic() - clock, time.monotonic()
                digest_file = scratch / "digest"
                host = _registry_of(repository)
                insecure = host in self.registries_insecure or host.split(":")[0] in self.registries_insecure
                tls = "false" if insecure else "true"
                push = [skopeo, "copy", "--quiet", "--digestfile", str(digest_file), f"--dest-tls-verify={tls}"]
                if auth_file:
                    push += ["--dest-authfile", auth_file]
                self._skopeo([*push, f"dir:{layout}", f"docker://{repository}:{tag}"], timeout=900)
                digest = digest_file.read_text().strip()
                timings["push_s"] = time.monotonic() - clock
                inspect = [skopeo, "inspect", "--raw", f"--tls-verify={tls}"]
                if auth_file:
                    inspect += ["--authfile", auth_file]
                raw = self._skopeo([*inspect, f"docker://{repository}@{digest}"], timeout=120)
                top = json.loads((layout / "manifest.json").read_text())["layers"][-1]["digest"]
                recipe = self._recipe(
                    self.podman.inspect("container", name) or {},
                    layout / top.split(":", 1)[1],
                    base_ref=meta["image"],
                    saved_ref=f"{repository}@{digest}",
                )
            except ImageSaveError as exc:
                raise LocalRuntimeError(str(exc)) from exc
            finally:
                self.podman.run("rmi", "--force", local, check=False, timeout=120)
                shutil.rmtree(scratch, ignore_errors=True)
            size = pulled_bytes(json.loads(raw), len(raw.encode()))
            return {
                "digest": digest,
                "size_bytes": size,
                "shifted": report.shifted,
                "dropped": report.dropped[:20],
                "timings": {k: round(v, 2) for k, v in timings.items()},
                "recipe": recipe,
            }

    def _recipe(self, info: Mapping, layer: Path, *, base_ref: str, saved_ref: str) -> str:
        """The saved image's recipe (``image_recipe``), read off its pushed top ``layer``; dpkg's status of
        the base is read from the container's lower layers (the topmost that has one). Best effort: a
        layer it cannot read gives no recipe (the save itself stands), with the reason logged."""
        lower = ((info.get("GraphDriver") or {}).get("Data") or {}).get("LowerDir") or ""
        base_status = None
        for folder in [f for f in lower.split(":") if f]:
            status = Path(folder) / "var/lib/dpkg/status"
            with contextlib.suppress(OSError):
                if status.is_file() and status.stat().st_size <= 32 << 20:
                    base_status = status.read_text(errors="replace")
                    break
        try:
            with open(layer, "rb") as data:
                contents = layer_read(data)
            return recipe_derive(
                contents,
                base_ref=base_ref,
                saved_ref=saved_ref,
                base_status=base_status,
                header={"Saved as": saved_ref},
            ).text
        except (OSError, tarfile.TarError) as exc:
            logger.warning("no recipe for %s: %s", saved_ref, exc)
        except Exception:
            logger.exception("no recipe for %s", saved_ref)
        return ""

    def _secret_values(self, key: str, meta: dict) -> list[str]:
        """What a saved image must never hold: the servers' tokens, and the owner's secrets as this run
        has them in its secrets folder (a stopped machine keeps none there; values under 8 characters
        are too common to look for)."""
        values = [str(v) for v in (meta.get("secrets") or {}).values()]
        folder = self.paths(key).secrets
        with contextlib.suppress(OSError):
            for entry in os.listdir(folder):
                if USER_SECRET_NAME.match(entry) and entry != USER_ENV_FILE:
                    with contextlib.suppress(OSError, UnicodeDecodeError):
                        value = (folder / entry).read_text().strip()
                        if len(value) >= 8:
                            values.append(value)
        return values

    def _image_save_direct(self, key: str, meta: dict, *, repository: str, tag: str, auth_file: str) -> dict | None:
        """The fast path of ``image_save``, or None where it does not apply (then: commit, copy, fix, push).

        When the instance runs a pinned image of the registry it is saved to, only what the container
        changed is read, from its overlay upper directory (paused while read, if it runs), written as one
        layer with the uids shifted and the console's paths dropped (``upper_layer_write``), and pushed
        beside the base's layers, which the registry mounts from the base's repository: no commit, no copy
        of the base. A kernel whose overlay uses metacopy or redirect_dir keeps partial files in the upper
        directory: the commit path then."""
        try:
            base_host, base_path, base_digest = split_reference(meta["image"])
        except ValueError:
            return None
        host, _slash, path = repository.partition("/")
        if host != base_host or _overlay_partial_copies():
            return None
        name = self.container_name(key)
        info = self.podman.inspect("container", name) or {}
        upper = ((info.get("GraphDriver") or {}).get("Data") or {}).get("UpperDir") or ""
        if (info.get("GraphDriver") or {}).get("Name") != "overlay" or not Path(upper).is_dir():
            return None
        insecure = host in self.registries_insecure or host.split(":")[0] in self.registries_insecure
        tenant = meta["tenant"]
        scratch = self.paths(key).run / "image-save"
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        layer = scratch / "layer.tar"
        timings: dict[str, float] = {}
        clock = time.monotonic()
        running = (info.get("State") or {}).get("Status") == "running"
        try:
            with Registry(host, insecure=insecure, auth_file=auth_file) as registry:
                manifest = registry.manifest(base_path, base_digest)
                config = json.loads(registry.blob(base_path, manifest["config"]["digest"]))
                if running:  # a consistent copy: nothing writes while the layer is read
                    self.podman.run("pause", name, timeout=60)
                try:
                    with open(layer, "wb") as out:
                        report, layer_digest, layer_size = upper_layer_write(
                            Path(upper),
                            out,
                            uid_base=int(tenant["uid_base"]),
                            uid_count=int(tenant["uid_count"]),
                            secrets=self._secret_values(key, meta),
                        )
                finally:
                    if running:
                        self.podman.run("unpause", name, check=False, timeout=60)
                timings["layer_s"], clock = time.monotonic() - clock, time.monotonic()
                new_manifest, config_bytes = manifest_with_layer(
                    manifest, config, layer_digest=layer_digest, layer_size=layer_size
                )
                for blob in manifest.get("layers") or []:
                    registry.mount(path, blob["digest"], base_path)
                registry.upload(path, layer_digest, layer)
                registry.upload(path, new_manifest["config"]["digest"], config_bytes)
                digest, length = registry.put_manifest(path, tag, new_manifest)
                timings["push_s"], clock = time.monotonic() - clock, time.monotonic()
                recipe = self._recipe(info, layer, base_ref=meta["image"], saved_ref=f"{repository}@{digest}")
                timings["recipe_s"] = time.monotonic() - clock
        except PushUnsupported:
            return None  # the commit path says what is wrong, if anything is
        except ImageSaveError as exc:
            raise LocalRuntimeError(str(exc)) from exc
        except httpx.HTTPError as exc:
            raise PodmanError(f"the registry {host} did not answer: {exc}") from exc
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return {
            "digest": digest,
            "size_bytes": pulled_bytes(new_manifest, length),
            "shifted": report.shifted,
            "dropped": report.dropped[:20],
            "timings": {k: round(v, 2) for k, v in timings.items()},
            "path": "direct",
            "recipe": recipe,
        }

    def _skopeo(self, argv: list[str], *, timeout: float) -> str:
        try:
            result = subprocess.run(  # noqa: S603
                argv,
                capture_output=True,
                text=True,
                env=self.podman.env(),
                cwd=self.podman.workdir,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise PodmanError(f"skopeo {argv[1]} did not finish in {timeout:.0f} s") from exc
        if result.returncode != 0:
            raise PodmanError(f"skopeo {argv[1]}: {last_words(result.stderr) or 'failed'}")
        return result.stdout

    # --- volumes (directories on this host, bind-mounted with the tenant's ownership) --------------

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


def _last_lines(text: str, lines: int = 3, limit: int = 300) -> str:
    kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    joined = " / ".join(kept)
    return joined if len(joined) <= limit else "…" + joined[-limit:]


def _overlay_partial_copies() -> bool:
    """Whether the kernel's overlay may leave partial files in an upper directory (metacopy: metadata
    only; redirect_dir: a renamed folder that points at its lower self)."""
    for option in ("metacopy", "redirect_dir"):
        try:
            if Path(f"/sys/module/overlay/parameters/{option}").read_text().strip() not in ("N", "off", ""):
                return True
        except OSError:
            continue
    return False


def _conmon_wait(pid: int, *, timeout: float = 30.0) -> None:
    """Wait for a stopped container's conmon to finish its clean-up (it tears the network down after
    ``podman stop`` has returned). A start before that set the network up again beside the old one:
    the old port forwarding stayed first and the new container's ports answered "connection refused"."""
    if pid <= 0:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        except PermissionError:  # another user's process: alive
            pass
        time.sleep(0.05)
