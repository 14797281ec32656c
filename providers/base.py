"""The contract every provider fulfils: a core interface and three optional capabilities.

A backend is one provider (the simulated cloud, this host, a Slurm cluster, a Kubernetes namespace).
The console calls it from Celery workers, web and beat processes, possibly twice for the same thing
and possibly at once. Every backend keeps these clauses; ``providers/tests/test_contract.py`` checks
them, and those in the methods' docstrings, against every backend (the sixth: ``lint-imports``):

1. Repeats are harmless. Every method may be called again with the same ``key``: "already exists"
   and "already gone" count as done.
2. ``key`` is the instance's UUID and the provider-side name: a retry finds the machine it made
   instead of buying a second one.
3. ``state`` is the dict the backend returned last time. The console stores it verbatim on the
   instance and hands it back; the backend owns (and versions) its shape. It may be ``{}``: a
   machine the console found through ``machines()`` has no state of the console's.
4. Errors say whether retrying can help: ``TransientBackendError`` (the task retries it with backoff)
   or ``PermanentBackendError`` (the operation fails, with the message shown to the owner). Anything
   else is a bug, reported as one.
5. UNKNOWN is not GONE. A provider that cannot tell (unreachable, refusing the console's
   credentials) says UNKNOWN from ``poll`` and raises ``TransientBackendError`` from ``machines``;
   GONE means it has positively no machine by that key.
6. A provider reads nothing of the console and imports none of its apps: what it needs comes in the
   call (``InstanceSpec``, ``state``) or in its ``OPTIONS``.

Capabilities are mixins, inherited before the core class
(``class MyBackend(VolumesCapability, ProvisioningBackend)``); a backend without one answers as the
core class does: one node per machine, no volumes, no entry points, no GPU samples, clusters that
keep the size they were made with (``ClusterResizeCapability``).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.user_content import ProxyTarget


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
    # An engine that preempts by itself (Slurm's partition preemption with requeue) took the machine's
    # cards back for higher-priority work, or requeued it when its node failed: its disk is kept and
    # it is queued at the provider, which boots it again by itself (``poll`` then says RUNNING).
    PREEMPTED = "preempted"


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
    # The app's CPU variant (llama.cpp for a chat whose GPU engine is vLLM): another launch, with its
    # own image (``image``: the console's pinned reference; ``image_slug``: the catalogue image, for a
    # host that maps slugs to local images). A container backend runs it on a host without real GPUs,
    # or always when ``gpu_required`` is false; other backends run the main launch.
    cpu: AppLaunch | None = None
    image_slug: str = ""
    gpu_required: bool = True


@dataclass(frozen=True)
class VolumeMount:
    """A volume attached to a machine: ``key`` is the volume's provider-side name (``volume_create``)."""

    key: str
    path: str  # where it appears in the machine, e.g. /mnt/data
    read_only: bool = False
    state: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class RegistryLogin:
    """How to pull a private image the owner brought (``Image.imported_from``): their saved login to its
    registry, decrypted for this boot. A backend hands it to its engine for the pull only (an auth file
    of mode 600 removed after it, never a command line, the state or the metadata)."""

    host: str
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class SecretValue:
    """One of the owner's secrets, given to the machine at this boot only.

    A backend puts ``value`` in the file ``/run/console-secrets/<name>`` (readable by the machine's user,
    never part of an image) and, with ``env``, exports it as the variable ``name`` to the servers and
    log-in shells from a file in that folder (never the container's own environment, which a saved
    image keeps). It never writes the value into the state it returns (the console stores that
    verbatim) and needs no value after the boot: every start and restart brings them again.
    """

    name: str  # an environment variable's name ([A-Z_][A-Z0-9_]*), so a file name too
    value: str = field(repr=False)
    env: bool = False


@dataclass(frozen=True)
class Tenant:
    """The account a machine belongs to, as a host isolates it from every other account's machines.

    The console allocates and records these (``instances.tenancy``), so two accounts never share a
    uid range, whichever engine runs them and however many hosts it has: a host's own ``useradd``
    hands out overlapping subordinate ranges, and a range is what keeps one tenant's files and
    processes out of another's reach.
    """

    name: str  # a Unix user name on hosts that run jobs as the tenant (Slurm), a label elsewhere
    uid: int  # that Unix user's own uid (and gid): the same on every node
    uid_base: int  # the first host uid of its range: the container's uid 0 (``--uidmap 0:uid_base:uid_count``)
    uid_count: int = 65536


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
    # The interruptible ("spot") tier: an engine that preempts by itself (Slurm) may take it back for
    # on-demand work and requeue it; on-demand machines are never preempted by the engine.
    interruptible: bool = False
    # The owner's checkpoint command, run in the machine before a preemption takes it (``checkpoint``,
    # or the engine's own grace signal); empty: none.
    checkpoint_command: str = ""
    # The console took the cards on ``node`` (and ``peer_nodes``) from machines it preempted: run there,
    # not where the provider would choose (an engine that preempts by itself would take others' too).
    pin: bool = False
    # The OCI image the owner chose, pinned by digest at launch (``repository@sha256:…``), so a tag that
    # moves later never changes a machine that runs; empty where the catalogue has no image for it yet.
    image_ref: str = ""
    # Whose machine this is, for backends that isolate tenants (uid ranges, Unix users, namespaces).
    tenant: Tenant | None = None
    # What the machine may use beside its cards: the catalogue's CPU cores and RAM per card × cards.
    cpus: float = 0
    memory_gb: int = 0
    # The image's size as published (bytes, 0: unknown), for progress where the engine cannot tell.
    image_bytes: int = 0
    # The owner's secrets chosen for this machine, decrypted for this boot (``SecretValue``). Left out of
    # the repr, so a logged spec shows no value.
    secrets: tuple[SecretValue, ...] = field(default=(), repr=False)
    # A clone's disk: ``{"key": source machine's key, "snapshot": the snapshot's name, "state": what
    # ``snapshot_create`` returned}``; ``create`` makes the new machine's disk a copy of that snapshot
    # (SnapshotsCapability). None: a new, empty disk.
    disk_from: dict | None = None
    # The owner's login to the registry of an image they imported, when they saved one for its host.
    image_login: RegistryLogin | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Observation:
    state: Observed
    idle_seconds: int | None = None  # how long the GPUs have been idle, when the provider knows
    # Said to the owner: why it is not running yet ("Queued: position 2, reason Resources"), what broke.
    detail: str = ""
    # A new state to persist, when polling taught the provider something (where a queued job landed:
    # its ``node`` and ``gpus``, which the instance page shows). None: keep the state as it is.
    backend_state: dict | None = None
    # Where a boot has got to, for the instance page's launch timeline: one of ``BOOT_STAGES``
    # ("" when the provider does not say). A provider reports the stage it is in now; the console
    # records when each one was first seen, so each stage's duration is measured, not guessed.
    stage: str = ""
    # While the image is pulled: bytes fetched so far and in all (0 when unknown), for progress, rate
    # and time left.
    pull_bytes_done: int = 0
    pull_bytes_total: int = 0
    # Runs of the machine the provider fenced off: a run left on a node declared dead (its processes
    # outlived the node's agent) that stopped itself once a newer run held the disk, as
    # ``(node, when: a Unix time)``. The console puts each on the instance's timeline once.
    fenced: tuple[tuple[str, float], ...] = ()


# The stages of a container boot, in order: waiting for a place, on a node, the image pulled (or found
# cached), its container started, and JupyterLab / code-server / sshd answering (then RUNNING).
BOOT_STAGES = ("queued", "placed", "pulling", "image_ready", "container_started", "servers_answering")
# A boot that cannot succeed (the image could not be pulled, its container would not start): ``poll``
# reports it as ``Observation(PENDING or GONE, stage=BOOT_FAILED, detail=why)``; the console settles the
# instance with ``detail`` as its reason (a launch fails and nothing is billed).
BOOT_FAILED = "failed"


def image_cache_key(*, image_ref: str, image: str) -> str:
    """How a node's cache names a spec's image (``NodeInfo.images``): the digest ``image_ref`` pins,
    or the catalogue slug ``image`` when the image has no digest yet."""
    _name, at, digest = image_ref.rpartition("@")
    return digest if at else image


@dataclass(frozen=True)
class EntryPoints:
    """How the owner reaches a running machine; a provider that offers none returns the empty default."""

    web: tuple[str, ...] = ()  # servers the console's proxy opens: "lab" (JupyterLab), "code" (VS Code)
    ssh_port: int | None = None
    ssh_user: str = ""
    # Where that sshd is, when it is not on the console's host: a Slurm job's node, whose address the
    # user's SSH command must name (the console's host has no such port). "": the console's host.
    ssh_host: str = ""


@dataclass(frozen=True)
class SshTarget:
    """Where the console's SSH gateway (``gateway``) reaches a machine's sshd, and as whom it logs in.

    The gateway logs in with the instance's gateway key, which the console adds to
    ``InstanceSpec.ssh_public_keys`` at launch; user keys never leave the console. ``simulated``: there
    is no sshd behind it (the simulated cloud), and the gateway answers as a small built-in shell so
    that the whole flow can be tried and tested.
    """

    host: str = ""
    port: int = 0
    user: str = ""
    simulated: bool = False


@dataclass(frozen=True)
class GpuProcess:
    """A process using a card, as the driver lists it."""

    pid: int
    name: str
    memory_used_mib: int | None = None


@dataclass(frozen=True)
class GpuSample:
    """One card of one machine at one moment. A figure the provider cannot read is None, never 0:
    0 % utilisation means idle, which auto-stop acts on."""

    card: int  # the card's position in the machine, 0 … cards-1 (every node's, head first)
    utilization_pct: int | None
    memory_used_mib: int | None
    memory_total_mib: int | None
    power_w: int | None = None
    temperature_c: int | None = None
    processes: tuple[GpuProcess, ...] = ()


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
    # The network block (leaf switch, InfiniBand island; Slurm's topology SwitchName, a Kubernetes
    # node label) it belongs to: clusters are placed in as few blocks as they fit in. Empty: unknown.
    block: str = ""
    # The images the node holds in its cache, by digest (``sha256:…``; the image's slug for one never
    # published): the console stores them (``Node.cached_images``) so its pages can say which launch
    # needs a pull without asking the provider.
    images: tuple[str, ...] = ()


@dataclass(frozen=True)
class MachineInfo:
    key: str
    node: str
    cards: int
    observed: Observed
    extra: dict = field(default_factory=dict)


class ProvisioningBackend:
    """One provider: the core interface every backend implements.

    Constructed once per alias and process by ``providers.get_backend`` with its ``OPTIONS``; it may
    be used from several threads, so it keeps no per-call state on itself.
    """

    # True for a provider whose machines do not exist (the simulated cloud): production refuses it
    # unless CONSOLE_DEMO_MODE is set, and every page then says so (console.demo).
    simulated: bool = False
    # What a backend without a capability answers; its mixin changes the answer.
    max_nodes: int = 1  # ClustersCapability: the most nodes one machine spans
    supports_volumes: bool = False  # VolumesCapability
    supports_shared_write: bool = False  # VolumesCapability
    supports_gpu_samples: bool = False  # GpuMetricsCapability
    # A machine's disk lives on storage that survives its node (a shared filesystem, a network volume):
    # when the node fails, ``start`` on another node boots the same machine, disk and all, and the
    # console moves the instance there instead of marking it lost.
    disk_follows_node_loss: bool = False
    # The engine keeps a machine it preempted (or whose node failed) in its own queue and boots it
    # again by itself when capacity returns (Slurm's PreemptMode=REQUEUE): the console does not start
    # such a machine itself, it follows ``poll`` (PREEMPTED, then RUNNING).
    requeues_preempted: bool = False
    supports_cluster_resize: bool = False  # ClusterResizeCapability
    supports_image_save: bool = False  # ImagesCapability
    # ``experiment_runs`` reads what the console's hook recorded (configuration: the worker asks only these).
    reads_experiment_runs: bool = False
    supports_image_build: bool = False  # ImageBuildCapability
    supports_snapshots: bool = False  # SnapshotsCapability

    def __init__(self, *, alias: str, options: dict | None = None) -> None:
        self.alias = alias
        self.options = options or {}

    def nodes(self) -> list[NodeInfo]:
        """Every node the provider has, with its cards and health; the console places machines on these.

        Raises ``TransientBackendError`` when the provider cannot be asked right now."""
        raise NotImplementedError

    def has_image(self, slug: str, *, image_ref: str = "") -> bool:
        """Whether this provider can run the console's image ``slug`` (pinned as ``image_ref``, its
        digest on the console's registry, where it has one), from its configuration alone (no call to
        the provider: the launch asks it). A provider that maps images (Kubernetes: ``IMAGES``) says no
        for one it lacks, so the launch is refused before anything is made; never replaced."""
        return True

    def machines(self) -> list[MachineInfo]:
        """Every machine this alias has at the provider, stopped ones included, each key once: what
        the reconciler compares with the console's records. Raises ``TransientBackendError`` when
        the provider cannot be asked (never an empty list: that would read as "all gone")."""
        raise NotImplementedError

    def create(self, *, key: str, spec: InstanceSpec) -> dict:
        """Create and boot machine ``key`` on ``spec.node``, or return the one that exists; returns the
        state to persist.

        Repeated with the same key it makes no second machine. It does not wait for the boot: ``poll``
        says PENDING, then RUNNING. A spec the provider can never run is a ``PermanentBackendError``."""
        raise NotImplementedError

    def poll(self, *, key: str, state: dict) -> Observation:
        """What machine ``key`` is doing now: PENDING, RUNNING, STOPPED, DEGRADED, GONE or UNKNOWN.

        DEGRADED: powered on, but a part of it died (a user server crashed); ``start`` repairs it in
        place. GONE only when the provider has positively no machine by that key (never made,
        destroyed, or lost with its node). UNKNOWN when it cannot tell: poll answers UNKNOWN rather
        than raising for a provider it cannot reach. ``backend_state``, when set, is a new state to
        persist (where a queued job landed)."""
        raise NotImplementedError

    def stop(self, *, key: str, state: dict) -> dict:
        """Power off machine ``key``, keeping its disk; its GPUs go back to the provider. Returns the
        state to persist. Stopping a stopped machine is a no-op; a gone one may raise
        ``PermanentBackendError`` (the next poll says GONE)."""
        raise NotImplementedError

    def start(self, *, key: str, state: dict, node: str, spec: InstanceSpec | None = None) -> dict:
        """Boot stopped machine ``key`` on ``node`` (it may have moved), keeping its disk; returns the
        state to persist.

        ``spec`` is the machine's current spec (its app and volumes may have changed while it was
        stopped); None: keep what the machine had. On a running machine it is a no-op, on a DEGRADED
        one it restarts what died. A gone machine raises ``PermanentBackendError``."""
        raise NotImplementedError

    def restart(self, *, key: str, state: dict, spec: InstanceSpec | None = None) -> dict:
        """Reboot running machine ``key`` (with ``spec``: with that app and volumes), keeping its disk;
        returns the state to persist. The console restarts only running machines; a gone one raises
        ``PermanentBackendError``."""
        raise NotImplementedError

    def destroy(self, *, key: str, state: dict) -> None:
        """Destroy machine ``key`` and its disk; afterwards ``poll`` says GONE and ``machines`` omits it.

        Already gone, or never created, counts as success. ``state`` may be ``{}`` (the reconciler
        destroying a leaked machine it found through ``machines``): the key alone must find it."""
        raise NotImplementedError

    def checkpoint(self, *, key: str, state: dict, command: str, grace_s: int) -> bool:
        """Machine ``key`` is about to be preempted: run ``command`` on it now (the owner's checkpoint,
        e.g. ``python save.py /mnt/ckpt``), leaving it ``grace_s`` seconds before ``stop``. Returns
        whether the command was started; False where the provider cannot run one (the machine is then
        stopped after the grace period all the same). Repeats are harmless: a provider may run it again.
        An engine that preempts by itself (Slurm's GraceTime, Kubernetes' termination grace) sends its
        own signal and may ignore this."""
        return False

    def requeue(self, *, key: str, state: dict) -> dict:
        """The console preempts machine ``key`` (its grace period is over): take its cards back and,
        where the provider ``requeues_preempted``, queue it there to boot again by itself when capacity
        returns (its disk kept). Returns the state to persist. Without requeueing, it is ``stop``."""
        return self.stop(key=key, state=state)

    def cluster_resize(self, *, key: str, state: dict, spec: InstanceSpec) -> dict:
        """Without ClusterResizeCapability: a running cluster keeps the nodes it was made with (the
        console refuses a resize before asking, ``resize_not_supported``)."""
        raise PermanentBackendError("This provider cannot resize a running cluster.")

    def app_check(self, app: AppLaunch) -> str | None:
        """Why this provider cannot run ``app`` (say, its program is not installed on a process
        backend), or None. Asked before a deployment launches, so the refusal comes at once."""
        return None

    def image_save(self, *, key: str, state: dict, repository: str, tag: str) -> dict:
        """Without ImagesCapability: a machine cannot be saved as an image here (the console refuses
        before asking, ``image_save_not_supported``)."""
        raise PermanentBackendError("This provider cannot save a machine as an image.")

    def image_build(
        self, *, recipe: str, repository: str, tag: str, tenant: Tenant, limits: BuildLimits, progress=None
    ) -> dict:
        """Without ImageBuildCapability: the console builds nowhere here (it picks a provider that can)."""
        raise PermanentBackendError("This provider cannot build images.")

    def snapshot_create(self, *, key: str, state: dict, snapshot: str, progress=None) -> dict:
        """Without SnapshotsCapability: the console refuses before asking (``snapshots_not_supported``)."""
        raise PermanentBackendError("This provider cannot snapshot a machine's disk.")

    def snapshot_restore(self, *, key: str, state: dict, snapshot: str, snapshot_state: dict) -> None:
        raise PermanentBackendError("This provider cannot snapshot a machine's disk.")

    def snapshot_delete(self, *, key: str, state: dict, snapshot: str, snapshot_state: dict) -> None:
        raise PermanentBackendError("This provider cannot snapshot a machine's disk.")

    # Without EntryPointsCapability: nothing to reach.

    def entry_points(self, *, key: str, state: dict) -> EntryPoints:
        return EntryPoints()

    def proxy_target(self, *, key: str, service: str) -> ProxyTarget | None:
        return None

    def experiment_runs(self, *, key: str, state: dict) -> list[dict]:
        return []

    # Without GpuMetricsCapability: no samples.

    def gpu_samples(self, *, machines: Sequence[tuple[str, dict]], at: datetime) -> dict[str, list[GpuSample]]:
        return {}


class ClustersCapability:
    """Machines that span several nodes (``InstanceSpec.nodes`` > 1): a multi-node cluster.

    - ``max_nodes`` (more than one) is the most nodes one machine may span; the console refuses a
      larger cluster at launch.
    - ``create`` makes one machine of ``spec.nodes`` nodes with ``spec.gpu_count`` cards on each;
      ``spec.peer_nodes`` are where the console placed the others (``spec.node`` is the head). A
      provider that places clusters itself (Slurm, Kubernetes) may ignore them.
    - It is one machine: one key, one ``poll`` (RUNNING once every node runs, PENDING until then),
      one ``MachineInfo`` whose ``cards`` count every node's, one ``stop``, ``start`` and ``destroy``.
    """

    max_nodes: int = 128


class ClusterResizeCapability:
    """Elastic clusters: a running multi-node machine grows or shrinks by whole nodes while it runs.

    - ``cluster_resize`` is asked only of a RUNNING cluster (``spec.nodes`` > 1 before and after), with
      its spec at the new size: ``spec.node`` is the same head (rank 0, whose address is every rank's
      ``MASTER_ADDR``: it never leaves), ``spec.peer_nodes`` the other nodes in rank order. Growing, the
      old peers come first, unchanged, then the new ones (where the console placed them: a provider
      that places clusters itself may ignore the names); shrinking, a prefix of the old peers: the
      highest ranks leave. The nodes that join get ``spec.gpu_count`` cards each, as the others have.
    - All or nothing: when a node cannot join (it is full, out of service), nothing changes and it
      raises ``PermanentBackendError`` saying why; the console then gives the cards it reserved back.
    - Repeats are harmless: a spec of the size the cluster already has changes nothing.
    - It does not stop the machine: ``poll`` goes on saying RUNNING (the joining nodes boot beside it),
      and ``machines()`` counts the new cards. Returns the state to persist.
    """

    supports_cluster_resize: bool = True

    def cluster_resize(self, *, key: str, state: dict, spec: InstanceSpec) -> dict:
        """Grow or shrink running cluster ``key`` to ``spec.nodes`` nodes (see the class's docstring)."""
        raise NotImplementedError


class VolumesCapability:
    """Volumes (the ``storage`` app): disks of their own, mounted into machines by ``InstanceSpec.volumes``.

    Volume calls keep the core clauses: repeats are harmless, ``key`` is the volume's UUID, ``state``
    is the backend's own.
    """

    supports_volumes: bool = True
    # Whether several machines may mount one volume read-write at once (NFS, CephFS, a host path).
    supports_shared_write: bool = False

    def volume_create(self, *, key: str, size_gb: int, owner_ref: str = "") -> dict:
        """Create volume ``key`` of ``size_gb`` GB, or return the one that exists. Returns its state.
        ``owner_ref`` is the owner's reference, as ``InstanceSpec.owner_ref`` names it: a provider that
        keeps each tenant apart (Kubernetes: a namespace each) puts the volume where its machines are."""
        raise NotImplementedError

    def volume_resize(self, *, key: str, state: dict, size_gb: int) -> dict:
        """Grow volume ``key`` to ``size_gb`` GB; returns its new state. Shrinking, or a volume that is
        gone, is a ``PermanentBackendError``."""
        raise NotImplementedError

    def volume_destroy(self, *, key: str, state: dict) -> None:
        """Delete volume ``key`` and its files. Already gone, or never created, counts as success."""
        raise NotImplementedError

    def volume_usage(self, *, key: str, state: dict) -> int | None:
        """Bytes stored on volume ``key``; None when the provider cannot tell right now."""
        raise NotImplementedError

    def volume_files_dir(self, *, key: str, state: dict) -> Path | None:
        """The directory on the console's own host that holds volume ``key``'s files, for the console's
        file browser (``storage.files``); None when they are elsewhere (a cluster's claim, a cloud's
        disk): there they are reached through a running instance that mounts the volume."""
        return None


class EntryPointsCapability:
    """Ways in: the web servers a running machine serves behind the console's proxy, and SSH."""

    def entry_points(self, *, key: str, state: dict) -> EntryPoints:
        """What machine ``key`` offers its owner while it runs (the console asks only then)."""
        raise NotImplementedError

    def proxy_target(self, *, key: str, service: str) -> ProxyTarget | None:
        """Where the console's proxy sends the owner's requests for ``service`` of ``key``, or None
        when the machine does not serve it (right now). The caller has checked ownership; this only
        locates the server."""
        raise NotImplementedError

    def ssh_target(self, *, key: str) -> SshTarget | None:
        """Where the SSH gateway reaches machine ``key``'s sshd now, or None when it serves none (not
        running, or started without SSH). Like ``proxy_target``, the caller has checked ownership."""
        return None

    def port_target(self, *, key: str, port: int) -> ProxyTarget | None:
        """Where the console's proxy reaches ``port`` of machine ``key`` (a server of the owner's own, such
        as TensorBoard on 6006), served at "/" (``strip_prefix``); None when the machine is not here now.
        The caller has checked that the port is declared and who may use it."""
        return None

    def experiment_runs(self, *, key: str, state: dict) -> list[dict]:
        """The experiment-tracking runs (W&B) machine ``key`` started, newest first, as the console's hook
        in its image recorded them: ``{"url", "host", "name", "project", "entity", "id", "at"}``. Read
        from the owner's own files, so only addresses, checked, for the owner's page; [] when unknown."""
        return []


class GpuMetricsCapability:
    """What the GPUs of running machines are doing: utilisation, memory, power, temperature per card.

    The console's worker asks every ``METRICS_SAMPLE_INTERVAL_S`` (15 s) for all the running machines
    of an alias at once, so a provider reads its source once per tick (one ``nvidia-smi``, one scrape
    per node), not once per machine; pages only read what was stored.
    """

    supports_gpu_samples: bool = True

    def gpu_samples(self, *, machines: Sequence[tuple[str, dict]], at: datetime) -> dict[str, list[GpuSample]]:
        """Samples for each ``(key, state)`` in ``machines``, by key, one per card, taken now.

        ``at`` is the tick the samples will be stored under (a simulated provider derives its series
        from it, so a repeat gives the same figures). A machine the provider cannot read right now is
        left out (the chart shows a gap; it is not idle); a provider it cannot reach at all raises
        ``TransientBackendError``. Keys it does not know are left out too, never an error."""
        raise NotImplementedError


class ImagesCapability:
    """Save a machine as an image: its system as it is now, pushed to the console's registry.

    - ``image_save`` commits machine ``key`` (running or stopped) and pushes the result to
      ``repository:tag`` (``repository`` is a full reference on the console's registry,
      ``host:port/users/42/my-env``, chosen by the console). Returns ``{"digest": "sha256:…",
      "size_bytes": n}``: the manifest digest the registry serves and what a pull fetches, and, where the
      provider can read the saved layer, ``"recipe"``: a Containerfile that rebuilds it
      (``providers.local.runtime.image_recipe``).
    - What goes in is the machine's own filesystem (installed packages, files outside its disk and
      volumes); never the console's secrets, keys or host keys (mounted from outside, or on a tmpfs),
      nor the console's labels. Ownership is the image's own (uid 0 … 65535), whatever tenant range
      the machine ran in, so another tenant's launch can read it.
    - Repeats are harmless: saving again to the same ``repository:tag`` replaces it and answers the
      new digest. A gone machine is a ``PermanentBackendError``; a registry that does not answer is a
      ``TransientBackendError``.
    """

    supports_image_save: bool = True

    def image_save(self, *, key: str, state: dict, repository: str, tag: str) -> dict:
        """Commit machine ``key`` and push it to ``repository:tag`` (see the class's docstring)."""
        raise NotImplementedError


@dataclass(frozen=True)
class BuildLimits:
    """What one image build may use (``INSTANCES_IMAGE_BUILD_*``): CPUs, memory, processes, seconds,
    and the network its steps get (``none``, or ``tenant``: the owner's own instance network and its
    firewall, where the provider has one)."""

    cpus: float = 2.0
    memory_gb: float = 4.0
    pids: int = 1024
    timeout_s: int = 1800
    network: str = "none"


class ImageBuildCapability:
    """Build an image from a recipe (a Containerfile) and push it to the console's registry.

    - ``image_build`` builds ``recipe`` (already checked by the console: one ``FROM`` of the console's
      registry the owner may use, ``COPY`` only ``--from`` such images, no ``ADD``, no ``RUN --mount``)
      with no build context, isolated in ``tenant``'s uid range, held to ``limits``, and pushes the
      result to ``repository:tag``. ``progress``, when given, is called with the log's text so far
      now and then. Returns ``{"digest", "size_bytes", "log"}``.
    - A build that fails or runs past ``limits.timeout_s`` is a ``PermanentBackendError`` whose message
      ends with the log's tail; a registry that does not answer is a ``TransientBackendError``.
    """

    supports_image_build: bool = True

    def image_build(
        self, *, recipe: str, repository: str, tag: str, tenant: Tenant, limits: BuildLimits, progress=None
    ) -> dict:
        raise NotImplementedError


class SnapshotsCapability:
    """Snapshots of a machine's disk (``/home/user``): taken, restored into the same machine, deleted,
    and copied into a new machine (a clone: ``InstanceSpec.disk_from`` at ``create``).

    - ``snapshot_create`` copies machine ``key``'s disk (running or stopped) under the name
      ``snapshot`` (chosen by the console, unique); a running machine's disk is made consistent first
      (frozen for the copy, or the engine's own crash-consistent snapshot). ``progress``, when given, is
      called with a percentage (0 … 100) now and then. Returns ``{"size_bytes": n, …}``: what the copy
      takes (billed), plus anything the provider needs later (the console hands it back as
      ``snapshot_state``). Repeats are harmless: a snapshot that exists answers its figures again.
    - ``snapshot_restore`` replaces the disk of stopped machine ``key`` with the snapshot's content;
      a running machine is a ``PermanentBackendError`` (the console stops it first or refuses).
    - ``snapshot_delete`` removes the copy; already gone is done. Releasing the machine removes its
      snapshots with it.
    """

    supports_snapshots: bool = True

    def snapshot_create(self, *, key: str, state: dict, snapshot: str, progress=None) -> dict:
        raise NotImplementedError

    def snapshot_restore(self, *, key: str, state: dict, snapshot: str, snapshot_state: dict) -> None:
        raise NotImplementedError

    def snapshot_delete(self, *, key: str, state: dict, snapshot: str, snapshot_state: dict) -> None:
        raise NotImplementedError
