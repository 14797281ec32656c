"""This host as a provider: per instance a JupyterLab, a code-server and an sshd (``providers.local.runtime``).

Like JupyterHub's local process spawner: a machine is a directory (its disk) and a few processes
started by ``providers.local.runtime.supervisor.LocalRuntime``; the host's GPUs (``nvidia-smi``, or simulated
cards when it has none) are its one node. Every method may be repeated: the runtime finds what
exists by the instance's key, starts only what is not running and treats "already gone" as done.

    PROVISIONING_BACKENDS["local"] = {
        "BACKEND": "providers.local.backend.LocalBackend",
        "OPTIONS": {
            "REGION": "local",               # the region slug its node is in (catalogue_seed creates it)
            "REGION_NAME": "This host",
            "NODE": "gpu-box-1",             # default: the host name
            "SIMULATED_GPUS": 8,             # cards offered when the host has no NVIDIA GPU
            "SIMULATED_GPU_NAME": "NVIDIA H200",
            # and any LOCAL_RUNTIME key (ROOT, SERVICES, PORT_LOW, PORT_HIGH…) for a runtime of its own
        },
    }

Without runtime keys in OPTIONS the backend uses the host's one runtime (``settings.LOCAL_RUNTIME``).

Volumes are directories under ``<runtime root>/volumes/<key>``, mounted into instances at the path
the user chose (see ``providers.local.runtime.supervisor``: a symlink, or a read-only bind mount). One host
means one filesystem, so several instances may write to a volume at once (``supports_shared_write``).
A volume's size is what the console bills and shows usage against; a directory has no size of its
own, so nothing stops files growing past it (usage says so).
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime
from pathlib import Path

from django.conf import settings

from core.user_content import ProxyTarget
from providers.base import (
    BOOT_FAILED,
    AppLaunch,
    BuildLimits,
    EntryPoints,
    EntryPointsCapability,
    GpuMetricsCapability,
    GpuProcess,
    GpuSample,
    ImageBuildCapability,
    ImagesCapability,
    InstanceSpec,
    MachineInfo,
    NodeInfo,
    Observation,
    Observed,
    PermanentBackendError,
    ProvisioningBackend,
    SnapshotsCapability,
    SshTarget,
    Tenant,
    TransientBackendError,
    VolumesCapability,
)
from providers.local.runtime import registry
from providers.local.runtime.containers import ContainerRuntime
from providers.local.runtime.gpus import GpuDiscoveryError, GpuInventory, NotEnoughGpus, gpu_discover, gpu_read
from providers.local.runtime.image_build import image_build
from providers.local.runtime.podman import PodmanError
from providers.local.runtime.ports import NoFreePort
from providers.local.runtime.servers import APP, CODE, LAB, SSH, WEBUI
from providers.local.runtime.supervisor import LocalRuntime, LocalRuntimeError, Mount
from providers.local.runtime.wandb_runs import wandb_runs_read

STATE_VERSION = 1
GPU_BUSY_PCT = 5  # a card at or above this utilisation is in use (auto-stop's idle check)
VOLUME_STATE_VERSION = 1
# The runtime's own settings; any of them in OPTIONS gives this backend a runtime of its own.
RUNTIME_KEYS = (
    "ROOT",
    "SERVICES",
    "PORT_LOW",
    "PORT_HIGH",
    "JUPYTER_BIN",
    "CODE_SERVER_ENTRY",
    "NODE_BIN",
    "SSHD_BIN",
    "PUBLIC_MOUNTS",
    "ENGINE",
    "IMAGES",
    "DEFAULT_IMAGE",
    "LIMITS",
    "CDI_SPEC_DIRS",
    "CONTAINERS_DIR",
    "FIREWALL",
    "EGRESS_DENY",
)
SERVER_NAMES = {LAB: "JupyterLab", CODE: "VS Code", SSH: "the SSH server", APP: "The app", WEBUI: "The app's WebUI"}

_OVERALL = {
    "gone": Observed.GONE,
    "stopped": Observed.STOPPED,
    "starting": Observed.PENDING,
    "running": Observed.RUNNING,
    "crashed": Observed.DEGRADED,
}


class LocalBackend(
    VolumesCapability,
    EntryPointsCapability,
    GpuMetricsCapability,
    ImagesCapability,
    ImageBuildCapability,
    SnapshotsCapability,
    ProvisioningBackend,
):
    # No ClustersCapability: one host is one node, so the console refuses a multi-node cluster here.
    supports_shared_write = True  # one host, one filesystem: every instance sees the same directory

    def __init__(self, *, alias: str, options: dict | None = None) -> None:
        super().__init__(alias=alias, options=options)
        self.node = self.options.get("NODE") or socket.gethostname()
        self.region = self.options.get("REGION", "local")
        own = {k: v for k, v in self.options.items() if k in RUNTIME_KEYS}
        self._runtime = (
            registry.runtime_from_options({**getattr(settings, "LOCAL_RUNTIME", {}), **own}) if own else None
        )

    @property
    def runtime(self) -> LocalRuntime | ContainerRuntime:
        return self._runtime or registry.get_runtime()

    @property
    def containers(self) -> bool:
        return isinstance(self.runtime, ContainerRuntime)

    # --- the node -----------------------------------------------------------------------------------------

    def inventory(self) -> GpuInventory:
        runtime_options = getattr(settings, "LOCAL_RUNTIME", {})
        option = lambda name, default: self.options.get(name, runtime_options.get(name, default))  # noqa: E731
        try:
            return gpu_discover(
                nvidia_smi=option("NVIDIA_SMI", "nvidia-smi"),
                simulated=int(option("SIMULATED_GPUS", 8)),
                simulated_name=option("SIMULATED_GPU_NAME", "NVIDIA H200"),
            )
        except GpuDiscoveryError as exc:
            raise TransientBackendError(f"This host's GPUs could not be listed: {exc}") from exc

    def nodes(self) -> list[NodeInfo]:
        inventory = self.inventory()
        if not inventory.gpus:
            return []
        return [
            NodeInfo(
                name=self.node,
                region=self.region,
                gpu_model=inventory.model_slug,
                cards=len(inventory.gpus),
                healthy=not self.runtime.missing_components(),
                images=self._cached_images(),
            )
        ]

    def _cached_images(self) -> tuple[str, ...]:
        """The images podman holds here (the launch page says "cached on this node"); none to report
        for the process engine, which runs no image."""
        if not self.containers or self.runtime.missing_components():
            return ()
        try:
            return self.runtime.cached_images()
        except PodmanError:
            return ()

    def _cards(self, key: str, count: int) -> list[str]:
        available = [str(gpu.index) for gpu in self.inventory().gpus]
        try:
            return self.runtime.gpus.allocate(key, count, available)
        except NotEnoughGpus as exc:
            # The console placed it on free cards; a moment of disagreement (a release still in
            # flight) passes, so this is retried.
            raise TransientBackendError(str(exc)) from exc

    def _start(self, key: str, **kwargs) -> dict:
        try:
            state = self.runtime.start(key, **kwargs)
        except NoFreePort as exc:
            raise TransientBackendError(f"No free port on this host: {exc}") from exc
        except (LocalRuntimeError, PodmanError) as exc:
            raise PermanentBackendError(str(exc)) from exc
        # Which of the app's variants runs, for the deployment's page: the CPU one is an image of its own.
        app = ((self.runtime.meta(key) or {}).get("app") or {}) if self.containers else {}
        variant = {"app_variant": "cpu"} if app.get("image_slug") else {}
        return {**state, "v": STATE_VERSION, "gpus": list(kwargs.get("gpus", ())), **variant}

    # --- the machine ------------------------------------------------------------------------------------

    def _mounts(self, spec: InstanceSpec | None) -> list[Mount] | None:
        """The spec's volumes as the runtime's mounts; None (keep what the machine had) without a spec."""
        if spec is None:
            return None
        mounts = [
            Mount(source=str(self._call(self.runtime.volume_path, v.key)), path=v.path, read_only=v.read_only)
            for v in spec.volumes
        ]
        if self.containers and spec.tenant is not None:
            for mount in mounts:  # the tenant's uid 1000 owns its volumes (read-only ones are mounted :ro)
                self.runtime.volume_own(mount.source, asdict(spec.tenant))
        return mounts

    def _secrets(self, spec: InstanceSpec | None) -> dict:
        """The spec's secrets as the container runtime's ``user_secrets`` keyword (None without a spec:
        keep those written); the values go to the secrets folder only, never to the state or metadata.
        The process engine runs servers as the host's user, with no folder of the contract to put
        them in: a machine with secrets is refused there rather than booted without them."""
        if spec is None:
            return {"user_secrets": None} if self.containers else {}
        if self.containers:
            return {"user_secrets": [{"name": s.name, "value": s.value, "env": s.env} for s in spec.secrets]}
        if spec.secrets:
            raise PermanentBackendError("This host runs processes, not containers: it cannot give a machine secrets.")
        return {}

    def _login(self, spec: InstanceSpec | None) -> dict:
        """The owner's login to a private image's registry as the container runtime's ``registry_login``
        keyword (for its pull only); nothing for the process engine, which pulls no image."""
        if spec is None or spec.image_login is None or not self.containers:
            return {}
        login = spec.image_login
        return {"registry_login": {"host": login.host, "username": login.username, "password": login.password}}

    def create(self, *, key: str, spec: InstanceSpec) -> dict:
        secrets = {**self._secrets(spec), **self._login(spec)}
        cards = self._cards(key, spec.gpu_count)
        extra = {}
        if self.containers:
            if spec.tenant is None:
                raise PermanentBackendError(
                    "This host runs every machine in its owner's own uid range, and this one has none."
                )
            variant = self._cpu_variant(spec)
            extra = {
                "tenant": asdict(spec.tenant),
                "image": self.runtime.image_for(image_ref=variant.image, image_slug=variant.image_slug)
                if variant is not None
                else self.runtime.image_for(image_ref=spec.image_ref, image_slug=spec.image),
                "cpus": spec.cpus,
                "memory_gb": spec.memory_gb,
                "disk_gb": spec.disk_gb,
            }
        if spec.disk_from and self._meta(key) is None:  # a clone: its disk starts as the snapshot's copy
            source_key, snapshot = str(spec.disk_from["key"]), str(spec.disk_from["snapshot"])
            self._call(lambda k: self.runtime.disk_seed(k, source_key=source_key, snapshot=snapshot), key)
        return self._start(
            key,
            owner_ref=spec.owner_ref,
            gpus=cards,
            ssh_public_keys=spec.ssh_public_keys,
            mounts=self._mounts(spec),
            app=self._app(spec),
            **extra,
            **secrets,
        )

    def _cpu_variant(self, spec: InstanceSpec | None) -> AppLaunch | None:
        """The app's CPU variant when this host runs it: containers only (the variant is an image), on a
        host whose cards are simulated (no real GPU), or always for an app that needs no GPU."""
        app = spec.app if spec is not None else None
        if not self.containers or app is None or app.cpu is None:
            return None
        if not app.gpu_required or self.inventory().simulated:
            return app.cpu
        return None

    def _app(self, spec: InstanceSpec) -> dict | None:
        """The spec's app as the runtime keeps it in the instance's metadata (JSON): its CPU variant
        where this host runs that one (``_cpu_variant``), else the app itself; never both."""
        if spec.app is None:
            return None
        chosen = self._cpu_variant(spec) or spec.app
        return {**asdict(chosen), "cpu": None}

    def app_check(self, app: AppLaunch) -> str | None:
        """Why this host cannot run ``app`` (its program is not installed), or None: asked before a
        deployment is launched here, so the user hears it at once instead of from a failed launch."""
        return self.runtime.app_missing(asdict(app))

    def start(self, *, key: str, state: dict, node: str, spec: InstanceSpec | None = None) -> dict:
        """Start what is not running: a stopped machine, or the crashed server of a running one."""
        meta = self._meta(key)
        if meta is None:
            raise PermanentBackendError("This machine no longer exists on this host.")
        if self.containers:
            self.runtime.oom_acknowledge(key)  # a repair after an OOM kill: the owner has been told
        # The spec says how many cards this run takes (0 without GPU: no CUDA_VISIBLE_DEVICES cards, the
        # ones it held go back); a repair without one keeps what it holds.
        count = spec.gpu_count if spec is not None else len(meta.get("gpus") or state.get("gpus") or ())
        secrets = {**self._secrets(spec), **self._login(spec)}  # a new container may pull its image again
        cards = self._cards(key, count)
        return self._start(
            key,
            owner_ref=meta.get("owner_ref", ""),
            gpus=cards,
            ssh_public_keys=meta.get("ssh_public_keys", ()),
            mounts=self._mounts(spec),
            app=self._app(spec) if spec is not None else ...,
            # This run's CPU and RAM (a run without GPU has its own allowance); a repair keeps what it had.
            **({"cpus": spec.cpus, "memory_gb": spec.memory_gb} if spec is not None and self.containers else {}),
            **secrets,
        )

    def stop(self, *, key: str, state: dict) -> dict:
        if self._meta(key) is not None:
            self._call(self.runtime.stop, key)
        return {**state, "ports": {}}

    def restart(self, *, key: str, state: dict, spec: InstanceSpec | None = None) -> dict:
        if self._meta(key) is None:
            raise PermanentBackendError("This machine no longer exists on this host.")
        mounts = self._mounts(spec)
        app = self._app(spec) if spec is not None else ...
        secrets = self._secrets(spec)
        restarted = self._call(lambda k: self.runtime.restart(k, mounts=mounts, app=app, **secrets), key)
        return {**state, **restarted, "v": STATE_VERSION}

    def destroy(self, *, key: str, state: dict) -> None:
        self._call(self.runtime.destroy, key)

    @property
    def supports_image_save(self) -> bool:  # type: ignore[override]
        return self.containers  # a process runtime has no image to commit

    def image_save(self, *, key: str, state: dict, repository: str, tag: str) -> dict:
        """Commit the instance's container and push it (``ContainerRuntime.image_save``). ``REGISTRY_AUTH_FILE``
        in OPTIONS: a containers-auth.json with the console registry's credentials, when it needs them."""
        if not self.containers:
            raise PermanentBackendError("This host runs instances as processes: there is no image to save.")
        auth_file = str(self.options.get("REGISTRY_AUTH_FILE") or "")
        runtime = self.runtime
        saved = self._call(lambda k: runtime.image_save(k, repository=repository, tag=tag, auth_file=auth_file), key)
        return {"digest": saved["digest"], "size_bytes": int(saved["size_bytes"]), "recipe": saved.get("recipe", "")}

    @property
    def supports_image_build(self) -> bool:  # type: ignore[override]
        return self.containers  # podman builds; a process runtime has none

    def image_build(
        self, *, recipe: str, repository: str, tag: str, tenant: Tenant, limits: BuildLimits, progress=None
    ) -> dict:
        """Build ``recipe`` with podman on this host and push it (``runtime.image_build``): in the tenant's
        uid range, held to ``limits``; ``REGISTRY_AUTH_FILE`` as for a save."""
        if not self.containers:
            raise PermanentBackendError("This host runs instances as processes: it has no image builder.")
        auth_file = str(self.options.get("REGISTRY_AUTH_FILE") or "")
        runtime = self.runtime
        built = self._call(
            lambda _key: image_build(
                runtime,
                recipe=recipe,
                repository=repository,
                tag=tag,
                tenant=asdict(tenant),
                limits=asdict(limits),
                auth_file=auth_file,
                progress=progress,
            ),
            "",
        )
        return {"digest": built["digest"], "size_bytes": int(built["size_bytes"]), "log": built["log"]}

    # --- snapshots of the disk (SnapshotsCapability) ----------------------------------------------------

    def snapshot_create(self, *, key: str, state: dict, snapshot: str, progress=None) -> dict:
        """A copy of ``home.img`` (containers; sparse, frozen while it runs) or of ``home/`` (processes)."""
        size = self._call(lambda k: self.runtime.snapshot_create(k, snapshot, progress), key)
        return {"size_bytes": int(size)}

    def snapshot_restore(self, *, key: str, state: dict, snapshot: str, snapshot_state: dict) -> None:
        self._call(lambda k: self.runtime.snapshot_restore(k, snapshot), key)

    def snapshot_delete(self, *, key: str, state: dict, snapshot: str, snapshot_state: dict) -> None:
        self._call(lambda k: self.runtime.snapshot_delete(k, snapshot), key)

    def poll(self, *, key: str, state: dict) -> Observation:
        try:
            status = self._call(self.runtime.status, key)
        except PodmanError as exc:
            return Observation(Observed.UNKNOWN, detail=str(exc))
        observed = _OVERALL[status.overall]
        if self.containers and observed in (Observed.RUNNING, Observed.PENDING):
            killed = self.runtime.out_of_memory(key)
            if killed:
                limit = ((self._meta(key) or {}).get("limits") or {}).get("memory_gb", "?")
                return Observation(
                    Observed.DEGRADED,
                    detail=f"Out of memory: the kernel killed {killed} process(es) over the machine's {limit} GB limit",
                )
        if observed == Observed.RUNNING:
            return Observation(observed, idle_seconds=self._idle_seconds(key), stage="servers_answering")
        if observed == Observed.PENDING and self.containers:
            stage, done, total = self.runtime.stage(key)
            if stage == BOOT_FAILED:  # the console settles it as failed, with this reason, and bills nothing
                return Observation(observed, stage=BOOT_FAILED, detail=self.runtime.boot_error(key))
            return Observation(observed, stage=stage, pull_bytes_done=done, pull_bytes_total=total)
        if observed != Observed.DEGRADED:
            return Observation(observed)
        crashed = [s for s in status.servers.values() if s.state == "crashed"]
        detail = "; ".join(
            f"{SERVER_NAMES.get(s.name, s.name)} stopped unexpectedly"
            + (f" ({_last_words(s.detail)})" if s.detail.strip() else "")
            for s in crashed
        )
        return Observation(Observed.DEGRADED, detail=detail)

    def _idle_seconds(self, key: str) -> int | None:
        meta = self._meta(key) or {}
        cards = set(meta.get("gpus") or ())
        try:
            gpus = self.inventory().gpus
        except TransientBackendError:
            gpus = []
        # A card of its busy is use; the simulated cards (no nvidia-smi) report 0.
        gpu_busy = any(str(g.index) in cards and (g.utilization_pct or 0) >= GPU_BUSY_PCT for g in gpus)
        try:
            return self.runtime.idle_seconds(key, gpu_busy=gpu_busy)
        except LocalRuntimeError:
            return None

    def gpu_samples(self, *, machines: Sequence[tuple[str, dict]], at: datetime) -> dict[str, list[GpuSample]]:
        """One ``nvidia-smi`` for the host, shared out by the cards each instance holds (its meta's
        ``gpus``, host indices in ``CUDA_VISIBLE_DEVICES`` order). Simulated cards (no driver) report
        what they do: nothing, 0 % and no memory, as the idle check already reads them."""
        option = self.options.get("NVIDIA_SMI", getattr(settings, "LOCAL_RUNTIME", {}).get("NVIDIA_SMI", "nvidia-smi"))
        try:
            readings = gpu_read(nvidia_smi=option)
        except GpuDiscoveryError as exc:
            raise TransientBackendError(f"This host's GPUs could not be read: {exc}") from exc
        simulated_total = None
        if not readings:
            gpus = self.inventory().gpus
            simulated_total = gpus[0].memory_total_mib if gpus else None
        samples: dict[str, list[GpuSample]] = {}
        for key, _state in machines:
            meta = self._meta(key)
            if meta is None or self.runtime.status(key).overall != "running":
                continue
            cards = []
            for position, card in enumerate(meta.get("gpus") or ()):
                reading = readings.get(int(card)) if str(card).isdigit() else None
                if reading is not None:
                    cards.append(
                        GpuSample(
                            card=position,
                            utilization_pct=reading.utilization_pct,
                            memory_used_mib=reading.memory_used_mib,
                            memory_total_mib=reading.memory_total_mib,
                            power_w=reading.power_w,
                            temperature_c=reading.temperature_c,
                            processes=tuple(GpuProcess(a.pid, a.name, a.memory_used_mib) for a in reading.processes),
                        )
                    )
                elif simulated_total is not None:
                    cards.append(
                        GpuSample(card=position, utilization_pct=0, memory_used_mib=0, memory_total_mib=simulated_total)
                    )
            samples[key] = cards
        return samples

    def machines(self) -> list[MachineInfo]:
        machines = []
        for key in self.runtime.instance_keys():
            meta = self._meta(key) or {}
            observed = _OVERALL[self.runtime.status(key).overall]
            machines.append(MachineInfo(key=key, node=self.node, cards=len(meta.get("gpus") or ()), observed=observed))
        return machines

    # --- entry points ---------------------------------------------------------------------------------

    def entry_points(self, *, key: str, state: dict) -> EntryPoints:
        meta = self._meta(key)
        if meta is None:
            return EntryPoints()
        ports = self.runtime.ports.get(key)
        if self.containers:  # the app listens on the container's own address: no published port
            ports = {**ports, **{s: 0 for s in self.runtime.servers_of(meta) if s in (APP, WEBUI)}}
        return EntryPoints(
            web=tuple(service for service in (LAB, CODE, APP, WEBUI) if service in ports),
            ssh_port=ports.get(SSH),
            ssh_user=meta.get("login_user", "") if SSH in ports else "",
        )

    def proxy_target(self, *, key: str, service: str):
        return registry.proxy_target(self.runtime, key=key, service=service)

    def port_target(self, *, key: str, port: int):
        if not self._meta(key):
            return None
        if self.containers:
            # Not published: the proxy reaches the container on its tenant network, any port at any time.
            try:
                address = self.runtime.address(key)
            except PodmanError as exc:
                raise TransientBackendError(f"podman: {exc}") from exc
            return ProxyTarget(host=address, port=int(port), strip_prefix=True) if address else None
        bind = self.runtime.bind  # the machine's processes share this host's network
        host = "127.0.0.1" if bind in ("0.0.0.0", "::") else bind  # noqa: S104 (a comparison)
        return ProxyTarget(host=host, port=int(port), strip_prefix=True)

    def ssh_target(self, *, key: str) -> SshTarget | None:
        meta = self._meta(key)
        port = self.runtime.ports.get(key).get(SSH) if meta else None
        if not meta or not port:
            return None
        bind = self.runtime.bind
        host = "127.0.0.1" if bind in ("0.0.0.0", "::") else bind  # noqa: S104 (a comparison)
        return SshTarget(host=host, port=int(port), user=meta.get("login_user", ""))

    # --- volumes ----------------------------------------------------------------------------------------

    def volume_create(self, *, key: str, size_gb: int, owner_ref: str = "") -> dict:
        path = self._call(self.runtime.volume_create, key)
        return {"v": VOLUME_STATE_VERSION, "path": str(path), "size_gb": size_gb}

    def volume_resize(self, *, key: str, state: dict, size_gb: int) -> dict:
        if not self._call(self.runtime.volume_path, key).is_dir():
            raise PermanentBackendError("The volume no longer exists on this host.")
        if size_gb < int(state.get("size_gb") or 0):
            raise PermanentBackendError("A volume can only grow.")
        return {**state, "v": VOLUME_STATE_VERSION, "size_gb": size_gb}

    def volume_destroy(self, *, key: str, state: dict) -> None:
        self._call(self.runtime.volume_destroy, key)

    def volume_usage(self, *, key: str, state: dict) -> int | None:
        return self._call(self.runtime.volume_usage, key)

    reads_experiment_runs = True

    def experiment_runs(self, *, key: str, state: dict) -> list[dict]:
        """Read off the machine's disk while it is mounted here (``wandb_runs``); [] otherwise."""
        home = self.runtime.paths(key).home
        return wandb_runs_read(home) if home.is_dir() else []

    def volume_files_dir(self, *, key: str, state: dict) -> Path | None:
        """The volume's directory on this host (the console runs here), when it exists."""
        path = self._call(self.runtime.volume_path, key)
        return path if path.is_dir() and not path.is_symlink() else None

    # --- helpers ----------------------------------------------------------------------------------------

    def _meta(self, key: str) -> dict | None:
        return self._call(self.runtime.meta, key)

    @staticmethod
    def _call(method, key: str):
        try:
            return method(key)
        except LocalRuntimeError as exc:
            raise PermanentBackendError(str(exc)) from exc
        except PodmanError as exc:
            raise TransientBackendError(f"podman: {exc}") from exc


def _last_words(log_tail: str, lines: int = 3, limit: int = 160) -> str:
    """The end of a crashed server's log, on one line: usually the error that killed it."""
    kept = [line.strip() for line in log_tail.splitlines() if line.strip()][-lines:]
    text = " / ".join(kept)
    return text if len(text) <= limit else "…" + text[-limit:]
