"""The contract every provisioning backend fulfils.

A backend is one provider (a simulated cloud, a Slurm cluster, a Kubernetes namespace…). The console
calls it from Celery workers, possibly twice for the same thing and possibly concurrently, so:

- every method may be repeated with the same ``key``; repeats are harmless ("already exists" and
  "already gone" count as done);
- ``key`` is the instance's UUID and the provider-side name, so a retry finds the machine it made
  instead of buying a second one;
- ``state`` is the opaque dict the backend returned last time; the console stores it verbatim on the
  instance and hands it back; the backend owns (and versions) its shape;
- errors say whether retrying can help: ``TransientBackendError`` (retried with backoff) or
  ``PermanentBackendError`` (the operation fails, with the message shown to the user).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class BackendError(Exception):
    """Base of backend failures; the message is shown to the instance's owner, so keep it plain."""


class TransientBackendError(BackendError):
    """The provider may succeed later (timeout, throttling, a node briefly unreachable)."""


class PermanentBackendError(BackendError):
    """Retrying cannot help (invalid spec, no such image, the node refused it)."""


class Observed(enum.StrEnum):
    """What the provider says a machine is doing."""

    PENDING = "pending"  # exists, not yet usable (booting, rebooting)
    RUNNING = "running"  # usable
    STOPPED = "stopped"  # powered off; its disk is kept
    GONE = "gone"  # the provider has no machine by that key (never made, destroyed, or lost)
    # Powered on, but a part of it died (a user server crashed): ``start`` repairs it in place.
    DEGRADED = "degraded"
    UNKNOWN = "unknown"  # the provider cannot tell right now: never treat this as GONE


@dataclass(frozen=True)
class AppLaunch:
    """An app the machine serves beside its entry points (a one-click deployment's server).

    ``argv`` is the start command. Backends fill in ``{port}`` (where the app must listen),
    ``{webui_port}`` (where its WebUI must listen, when it has one) and
    ``{base_path}`` (the URL prefix the console's proxy serves it under, ``/i/<id>/app``) before
    running it; container backends run it in ``image``, process backends (local, Slurm) on the node.
    The app is ready when ``GET {base_path}{health_path}`` on its port answers below 500.
    """

    name: str  # the app's slug, for logs and labels
    argv: tuple[str, ...]
    image: str = ""  # the app's container image, for backends that run containers
    port: int = 8000  # the port inside a container; process backends choose a free one
    env: tuple[tuple[str, str], ...] = ()
    health_path: str = "/"
    # True when the app serves under ``{base_path}`` itself; otherwise the proxy strips the prefix.
    serves_base_path: bool = True
    # A separate WebUI in front of the server (Open WebUI before vLLM), run beside it and served at
    # ``/i/<id>/webui/``; its command may name ``{port}`` (the server's) and ``{webui_port}`` (its own),
    # which backends fill in for both commands.
    webui: AppLaunch | None = None


@dataclass(frozen=True)
class VolumeMount:
    """A volume attached to a machine: ``key`` is the volume's provider-side name (``volume_create``)."""

    key: str
    path: str  # where it appears in the machine, e.g. /mnt/data
    read_only: bool = False
    state: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class InstanceSpec:
    """What to create: everything the provider needs, nothing it must look up in the console."""

    node: str  # the node the console placed it on (see ``nodes``)
    gpu_model: str  # slug
    gpu_count: int
    image: str  # slug
    disk_gb: int
    ssh_public_keys: tuple[str, ...] = ()
    region: str = ""
    owner_ref: str = ""  # an opaque owner label for the provider's own accounting
    app: AppLaunch | None = None  # a deployment's server, started with the machine and on every start
    volumes: tuple[VolumeMount, ...] = ()  # mounted at every start, in this order
    # Machines of a cluster, each with ``gpu_count`` cards (a Slurm job's ``--nodes``); 1: one machine.
    nodes: int = 1
    # The cluster's other nodes as the console placed them (``node`` is its head): ``nodes - 1`` names.
    # Providers that place clusters themselves (Slurm, Kubernetes) may ignore them.
    peer_nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Observation:
    state: Observed
    idle_seconds: int | None = None  # how long the GPUs have been idle, when the provider knows
    # Said to the owner: why it is not running yet ("Queued: position 2, reason Resources"), what broke.
    detail: str = ""
    # A new state to persist, when polling taught the provider something (where a queued job landed:
    # its ``node`` and ``gpus``, which the instance page shows). None: keep the state as it is.
    backend_state: dict | None = None


@dataclass(frozen=True)
class EntryPoints:
    """How the owner reaches a running machine; a provider that offers none returns the empty default."""

    web: tuple[str, ...] = ()  # servers the console's proxy opens: "lab" (JupyterLab), "code" (VS Code)
    ssh_port: int | None = None
    ssh_user: str = ""


@dataclass(frozen=True)
class NodeInfo:
    """A host as the provider reports it."""

    name: str
    region: str  # region slug
    gpu_model: str  # GPU model slug
    cards: int
    healthy: bool = True
    # Cards the provider itself counts free, when it schedules on its own (Slurm); None: it does not say.
    free_cards: int | None = None
    # Why an unhealthy node is out of service, in the provider's words ("down", "drain", "NotReady"):
    # shown to staff and on the timelines of the node's instances. Empty when healthy.
    detail: str = ""


@dataclass(frozen=True)
class MachineInfo:
    key: str
    node: str
    cards: int
    observed: Observed
    extra: dict = field(default_factory=dict)


class ProvisioningBackend:
    """One provider. Every method may be repeated with the same key; repeats are harmless."""

    # The most nodes one instance may span (``InstanceSpec.nodes``). One host can only give one: the
    # console refuses a larger cluster at launch in a region whose backend says so.
    max_nodes: int = 1
    # True for a provider whose machines do not exist (the simulated cloud): production refuses it
    # unless CONSOLE_DEMO_MODE is set, and every page then says so (console.demo).
    simulated: bool = False

    def __init__(self, *, alias: str, options: dict | None = None) -> None:
        self.alias = alias
        self.options = options or {}

    def nodes(self) -> list[NodeInfo]:
        """Every node the provider has, with its cards and health. The console places on these."""
        raise NotImplementedError

    def create(self, *, key: str, spec: InstanceSpec) -> dict:
        """Create and boot machine ``key`` on ``spec.node``, or return the one that exists.

        Returns the state to persist. Does not wait for the boot: ``poll`` says when it is RUNNING.
        """
        raise NotImplementedError

    def start(self, *, key: str, state: dict, node: str, spec: InstanceSpec | None = None) -> dict:
        """Boot the stopped machine ``key`` on ``node`` (it may have moved), keeping its disk.

        ``spec`` is the machine's current spec (its app and volumes may have changed while it was
        stopped); None from callers that predate it: keep what the machine had. Starting a running
        machine is a no-op. Raises ``PermanentBackendError`` when it is gone.
        """
        raise NotImplementedError

    def stop(self, *, key: str, state: dict) -> dict:
        """Power off machine ``key`` keeping its disk; its GPUs go back to the node. Stopped counts as done."""
        raise NotImplementedError

    def restart(self, *, key: str, state: dict, spec: InstanceSpec | None = None) -> dict:
        """Reboot machine ``key`` in place, keeping its GPUs; with ``spec``, boot it with that app and volumes."""
        raise NotImplementedError

    def destroy(self, *, key: str, state: dict) -> None:
        """Destroy machine ``key`` and its disk. Already gone counts as success."""
        raise NotImplementedError

    def poll(self, *, key: str, state: dict) -> Observation:
        """PENDING, RUNNING, STOPPED, GONE or UNKNOWN (provider unreachable: never treat as GONE)."""
        raise NotImplementedError

    def machines(self) -> list[MachineInfo]:
        """Every machine the provider has, for the reconciler to compare with the console's records."""
        raise NotImplementedError

    # Optional: entry points. A provider whose machines are reached some other way keeps these defaults.

    def entry_points(self, *, key: str, state: dict) -> EntryPoints:
        """What running machine ``key`` offers its owner: web servers behind the console's proxy, SSH."""
        return EntryPoints()

    def app_check(self, app: AppLaunch) -> str | None:
        """Why this provider cannot run ``app`` (say, its program is not installed on a process
        backend), or None. Asked before a deployment launches, so the refusal comes at once."""
        return None

    # Optional: volumes (``storage``). A backend without them keeps these defaults, and the console
    # offers no volumes in its regions.

    supports_volumes: bool = False
    # Whether several machines may mount one volume read-write at once (NFS, CephFS, a host path).
    supports_shared_write: bool = False

    def volume_create(self, *, key: str, size_gb: int) -> dict:
        """Create volume ``key`` of ``size_gb`` GB, or return the one that exists. Returns its state."""
        raise PermanentBackendError("This region has no volumes.")

    def volume_resize(self, *, key: str, state: dict, size_gb: int) -> dict:
        """Grow volume ``key`` to ``size_gb`` GB (never shrink); returns its new state."""
        raise PermanentBackendError("This region has no volumes.")

    def volume_destroy(self, *, key: str, state: dict) -> None:
        """Delete volume ``key`` and its files. Already gone counts as success."""
        raise PermanentBackendError("This region has no volumes.")

    def volume_usage(self, *, key: str, state: dict) -> int | None:
        """Bytes stored on volume ``key``; None when the provider cannot tell right now."""
        return None

    def proxy_target(self, *, key: str, service: str):
        """Where the console's proxy sends the owner's requests for ``service`` of ``key``.

        A ``core.proxy.ProxyTarget``, or None when the machine does not serve it (right now).
        The caller has checked ownership; this only locates the server.
        """
        return None
