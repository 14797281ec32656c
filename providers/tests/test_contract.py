"""The providers' contract (``providers.base``), clause by clause, against every provider.

Each test is one clause and runs once per provider:

- ``simulated``: the simulated cloud, on the test database;
- ``local``: this host, with a runtime in a temporary directory that runs one small app per machine
  (Python's ``http.server``: no JupyterLab or code-server needed) on two simulated cards;
- ``slurm-fake``: the Slurm backend with an in-process Slurm behind its transport (``slurm_fake``);
- ``slurm``: the Slurm backend on the real test cluster (``make slurm``), skipped without it;
- ``kubernetes``: the Kubernetes backend against the fake API server (``providers.kubernetes.tests.k8s_fake``).

A provider that lacks what a clause needs (a way to be unreachable, to crash, a capability) skips it
with the reason. A new provider gets a ``World`` here and must pass every clause.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from providers import (
    AppLaunch,
    ClusterResizeCapability,
    ClustersCapability,
    EntryPoints,
    EntryPointsCapability,
    GpuMetricsCapability,
    GpuSample,
    ImagesCapability,
    InstanceSpec,
    MachineInfo,
    NodeInfo,
    Observation,
    Observed,
    PermanentBackendError,
    ProvisioningBackend,
    SnapshotsCapability,
    TransientBackendError,
    VolumesCapability,
)
from providers.base import Tenant

PROVIDERS = ("simulated", "local", "slurm-fake", pytest.param("slurm", marks=pytest.mark.slurm), "kubernetes")
# The simulated cloud lives in the database; the others do not mind the test's transaction.
pytestmark = pytest.mark.django_db


@dataclass
class World:
    """A provider under test and the levers its world offers."""

    backend: ProvisioningBackend
    spec_fields: dict  # what an InstanceSpec needs here (its node, its GPU model)
    peer: str = ""  # a second node, for a cluster's other half
    advance: Callable[[], None] = lambda: None  # the provider's world moves on (boots what was asked)
    unreachable: Callable[[], ProvisioningBackend] | None = None  # the backend, its provider unreachable
    crash: Callable[[str], None] | None = None  # a running machine's server dies
    heal: Callable[[], None] = lambda: None  # what crashed may start again
    timeout: float = 20.0
    made: list[str] = field(default_factory=list)

    def spec(self, **changes) -> InstanceSpec:
        fields = {"gpu_count": 1, "image": "pytorch-2.5-cu124", "disk_gb": 20, "owner_ref": "user-1"}
        return InstanceSpec(**{**fields, **self.spec_fields, **changes})

    def key(self) -> str:
        key = str(uuid.uuid4())
        self.made.append(key)
        return key


def observe(backend: ProvisioningBackend, key: str, state: dict) -> Observation:
    observation = backend.poll(key=key, state=state)
    assert isinstance(observation, Observation)
    assert observation.state in set(Observed)
    return observation


def wait_for(world: World, key: str, state: dict, *wanted: Observed) -> tuple[Observation, dict]:
    """Poll as the console does (persisting what poll teaches) until the machine is in ``wanted``."""
    deadline = time.monotonic() + world.timeout
    while True:
        world.advance()
        observation = observe(world.backend, key, state)
        state = observation.backend_state if observation.backend_state is not None else state
        if observation.state in wanted:
            return observation, state
        if time.monotonic() > deadline:
            raise AssertionError(f"{key} is {observation.state} ({observation.detail}), not {wanted}")
        time.sleep(0.1)


def running(world: World, **changes) -> tuple[str, dict, InstanceSpec]:
    key, spec = world.key(), world.spec(**changes)
    state = world.backend.create(key=key, spec=spec)
    _observation, state = wait_for(world, key, state, Observed.RUNNING)
    return key, state, spec


def listed(backend: ProvisioningBackend, key: str) -> list[MachineInfo]:
    machines = backend.machines()
    assert all(isinstance(m, MachineInfo) for m in machines)
    return [m for m in machines if m.key == key]


# --- the providers ------------------------------------------------------------------------------------


def _simulated(request) -> World:
    from providers.simulated.backend import SimulatedBackend

    tmp = request.getfixturevalue("tmp_path")
    options = {
        "FLEET": [{"region": "r1", "gpu": "h200", "nodes": 2, "cards": 8}],
        "BOOT_DELAY_S": 0,
        "VOLUMES_DIR": str(tmp / "volumes"),  # volumes keep files on this host, for the file browser
    }
    return World(
        backend=SimulatedBackend(alias="contract", options=options),
        spec_fields={"node": "r1-h200-01", "gpu_model": "h200"},
        peer="r1-h200-02",
        unreachable=lambda: SimulatedBackend(alias="contract", options={**options, "UNREACHABLE": True}),
    )


def _local(request) -> World:
    import psutil

    from providers.local.backend import LocalBackend

    root = request.getfixturevalue("tmp_path") / "local"
    backend = LocalBackend(
        alias="local",
        options={
            "ROOT": str(root),
            "ENGINE": "process",  # the app as a process, so the contract runs where podman is not installed
            "SERVICES": [],  # no JupyterLab, code-server or sshd: the app alone
            "NODE": "test-host",
            "NVIDIA_SMI": "/nonexistent/nvidia-smi",
            "SIMULATED_GPUS": 2,
            "SIMULATED_GPU_NAME": "NVIDIA H200",
        },
    )
    app = AppLaunch(
        name="web",
        argv=("python3", "-m", "http.server", "{port}", "--bind", "127.0.0.1"),
        serves_base_path=False,
    )
    why = backend.app_check(app)
    if why:
        pytest.skip(why)

    def crash(key: str) -> None:
        for process in backend.runtime.processes(key):
            with contextlib.suppress(psutil.Error):
                process.kill()

    def clean() -> None:
        for key in backend.runtime.instance_keys():
            backend.runtime.destroy(key)

    request.addfinalizer(clean)
    return World(
        backend=backend,
        spec_fields={"node": "test-host", "gpu_model": "h200", "app": app},
        crash=crash,
        timeout=30.0,
    )


def _slurm_fake(request) -> World:
    from providers.slurm.backend import SlurmBackend
    from providers.slurm.tests.slurm_fake import FakeSlurm, FakeTenantAccounts

    root = request.getfixturevalue("tmp_path") / "slurm"
    backend = SlurmBackend(
        alias="slurm",
        # wall-clock: the fake ends a cancelled job at once, so the wait for its end is never waited out
        options={"ROOT": str(root), "SERVICES": [], "GPU_TYPES": {"h200": "h200"}, "END_WAIT_S": 1},
    )
    slurm = FakeSlurm(prefix=backend.prefix, nodes=("gpu01", "gpu02"))
    backend.api = slurm  # the one seam: the transport to slurmrestd or the command-line tools
    backend.tenants = FakeTenantAccounts()  # and the host's users (no root needed)

    def unreachable() -> ProvisioningBackend:
        slurm.down = True
        return backend

    def crash(key: str) -> None:
        slurm.crash(key)

    return World(
        backend=backend,
        spec_fields={"node": "gpu01", "gpu_model": "h200", "tenant": Tenant("gpuc-t9001", 79001, 1 << 30, 65536)},
        peer="gpu02",
        advance=slurm.advance,
        unreachable=unreachable,
        crash=crash,
    )


def _slurm(request) -> World:
    from providers.slurm.backend import SlurmBackend
    from providers.slurm.tests.slurm_helpers import cluster_or_skip, scratch, slurm_backends, tenant

    cluster = cluster_or_skip()
    request.addfinalizer(cluster.cancel_test_jobs)
    root = scratch(request) / "instances"
    options = slurm_backends(root, services=())["slurm"]["OPTIONS"]
    return World(
        backend=SlurmBackend(alias="slurm", options=options),
        spec_fields={"node": "gpu01", "gpu_model": "h200", "tenant": tenant(9001)},
        peer="gpu02",
        advance=lambda: time.sleep(0.2),
        timeout=60.0,
    )


def _kubernetes(request) -> World:
    from providers.kubernetes import KubernetesBackend, instance_name
    from providers.kubernetes.tests.k8s_fake import IMAGES, fake_api_server

    stack = contextlib.ExitStack()
    request.addfinalizer(stack.close)
    api = stack.enter_context(fake_api_server(request.getfixturevalue("tmp_path")))
    api.cluster.add_node("gpu-a", product="NVIDIA-H200", gpus=8)
    api.cluster.add_node("gpu-b", product="NVIDIA-H200", gpus=8)
    backend = KubernetesBackend(
        alias="k8s", options={"KUBECONFIG": str(api.kubeconfig), "REGION": "k8s-1", "IMAGES": IMAGES}
    )

    def unreachable() -> ProvisioningBackend:
        api.stop()
        return backend

    def crash(key: str) -> None:
        # The workspace's image starts crashing; its pod goes, and the StatefulSet's next one crash-loops.
        pod = api.cluster.get("pods", f"{instance_name(key)}-0")
        api.cluster.crashing_images.update(c["image"] for c in pod["spec"]["containers"])
        namespace = pod["metadata"]["namespace"]
        api.cluster.handle("DELETE", f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}", {}, b"", "")
        api.cluster.advance()

    return World(
        backend=backend,
        spec_fields={"node": "gpu-a", "gpu_model": "h200"},
        peer="gpu-b",
        advance=api.cluster.advance,
        unreachable=unreachable,
        crash=crash,
        heal=api.cluster.crashing_images.clear,
    )


@pytest.fixture(params=PROVIDERS)
def world(request) -> World:
    build = {
        "simulated": _simulated,
        "local": _local,
        "slurm-fake": _slurm_fake,
        "slurm": _slurm,
        "kubernetes": _kubernetes,
    }[request.param]
    world = build(request)
    yield world
    for key in world.made:
        with contextlib.suppress(Exception):
            world.backend.destroy(key=key, state={})


# --- repeats are harmless; the key finds the machine ---------------------------------------------------


def test_create_repeated_with_the_same_key_makes_one_machine(world):
    key, spec = world.key(), world.spec()
    first = world.backend.create(key=key, spec=spec)
    again = world.backend.create(key=key, spec=spec)
    assert isinstance(first, dict) and isinstance(again, dict)
    world.advance()
    assert len(listed(world.backend, key)) == 1


def test_a_new_machine_is_pending_then_running(world):
    key = world.key()
    state = world.backend.create(key=key, spec=world.spec())
    assert observe(world.backend, key, state).state in (Observed.PENDING, Observed.RUNNING)
    observation, _state = wait_for(world, key, state, Observed.RUNNING)
    assert observation.state == Observed.RUNNING


def test_a_key_never_created_is_gone(world):
    assert observe(world.backend, world.key(), {}).state == Observed.GONE


# --- destroy: already gone, or never created, counts as success; the key alone finds it -----------------


def test_destroying_a_machine_never_created_succeeds_with_no_state(world):
    key = world.key()
    world.backend.destroy(key=key, state={})
    world.backend.destroy(key=key, state={})
    assert observe(world.backend, key, {}).state == Observed.GONE


def test_destroy_with_no_state_finds_the_machine_by_its_key(world):
    # The reconciler's call for a leaked machine: it knows the key from machines(), and no state.
    key, state, _spec = running(world)
    world.backend.destroy(key=key, state={})
    wait_for(world, key, state, Observed.GONE)
    assert listed(world.backend, key) == []
    world.backend.destroy(key=key, state=state)  # and again, with the state it had: still done


# --- stop, start, restart ----------------------------------------------------------------------------------


def test_a_stopped_machine_is_kept_and_stopping_it_again_is_a_no_op(world):
    key, state, _spec = running(world)
    state = world.backend.stop(key=key, state=state)
    assert isinstance(state, dict)
    _observation, state = wait_for(world, key, state, Observed.STOPPED)
    state = world.backend.stop(key=key, state=state)
    assert observe(world.backend, key, state).state == Observed.STOPPED
    assert [m.observed for m in listed(world.backend, key)] == [Observed.STOPPED]


def test_start_boots_a_stopped_machine_and_is_a_no_op_on_a_running_one(world):
    key, state, spec = running(world)
    state = world.backend.stop(key=key, state=state)
    _observation, state = wait_for(world, key, state, Observed.STOPPED)
    state = world.backend.start(key=key, state=state, node=spec.node, spec=spec)
    _observation, state = wait_for(world, key, state, Observed.RUNNING)

    state = world.backend.start(key=key, state=state, node=spec.node, spec=spec)
    _observation, state = wait_for(world, key, state, Observed.RUNNING)
    assert len(listed(world.backend, key)) == 1


def test_restart_boots_a_running_machine_again(world):
    key, state, spec = running(world)
    state = world.backend.restart(key=key, state=state, spec=spec)
    assert isinstance(state, dict)
    wait_for(world, key, state, Observed.RUNNING)
    assert len(listed(world.backend, key)) == 1


def test_saving_a_machine_that_is_gone_as_an_image_is_a_permanent_error(world):
    if not world.backend.supports_image_save:
        pytest.skip("no ImagesCapability (or not with this engine)")
    with pytest.raises(PermanentBackendError):
        world.backend.image_save(key=world.key(), state={}, repository="registry.invalid/users/u1/x", tag="v1")


def test_a_snapshot_is_taken_running_repeated_harmlessly_restored_stopped_and_deleted_twice(world):
    if not world.backend.supports_snapshots:
        pytest.skip("no SnapshotsCapability (or not on this cluster)")
    key, state, _spec = running(world)
    answer = world.backend.snapshot_create(key=key, state=state, snapshot="snap-contract")
    assert answer["size_bytes"] >= 0
    assert (
        world.backend.snapshot_create(key=key, state=state, snapshot="snap-contract")["size_bytes"]
        == (answer["size_bytes"])
    )
    with pytest.raises(PermanentBackendError):  # a running machine's disk is not swapped under it
        world.backend.snapshot_restore(key=key, state=state, snapshot="snap-contract", snapshot_state=answer)
    state = world.backend.stop(key=key, state=state)
    _observation, state = wait_for(world, key, state, Observed.STOPPED)
    world.backend.snapshot_restore(key=key, state=state, snapshot="snap-contract", snapshot_state=answer)
    world.backend.snapshot_delete(key=key, state=state, snapshot="snap-contract", snapshot_state=answer)
    world.backend.snapshot_delete(key=key, state=state, snapshot="snap-contract", snapshot_state=answer)


def test_start_and_restart_of_a_machine_that_is_gone_are_permanent_errors(world):
    spec = world.spec()
    with pytest.raises(PermanentBackendError):
        world.backend.start(key=world.key(), state={}, node=spec.node, spec=spec)
    with pytest.raises(PermanentBackendError):
        world.backend.restart(key=world.key(), state={}, spec=spec)


# --- DEGRADED, UNKNOWN ---------------------------------------------------------------------------------


def test_a_machine_whose_server_died_is_degraded_not_gone_and_start_repairs_it(world):
    if world.crash is None:
        pytest.skip("this provider's machines have no server that can die on its own")
    key, state, spec = running(world)
    world.crash(key)
    _observation, state = wait_for(world, key, state, Observed.DEGRADED)
    assert [m.observed for m in listed(world.backend, key)] != [Observed.GONE]

    world.heal()
    state = world.backend.start(key=key, state=state, node=spec.node, spec=spec)
    wait_for(world, key, state, Observed.RUNNING)


def test_a_provider_that_cannot_be_reached_says_unknown_never_gone(world):
    if world.unreachable is None:
        pytest.skip("this provider is this host: it cannot be unreachable")
    key, state, spec = running(world)
    backend = world.unreachable()
    assert observe(backend, key, state).state == Observed.UNKNOWN
    with pytest.raises(TransientBackendError):
        backend.machines()  # never an empty list, which would read as "every machine is gone"
    with pytest.raises(TransientBackendError):
        backend.nodes()
    with pytest.raises(TransientBackendError):
        backend.create(key=world.key(), spec=spec)


# --- nodes, capabilities, entry points ---------------------------------------------------------------------


def test_nodes_include_where_the_console_places_machines(world):
    nodes = world.backend.nodes()
    assert all(isinstance(n, NodeInfo) for n in nodes)
    assert world.spec().node in {n.name for n in nodes}


def test_each_capability_is_declared_by_its_mixin_and_implemented(world):
    backend = world.backend
    cls = type(backend)
    assert isinstance(backend, ClustersCapability) == (backend.max_nodes > 1)
    if isinstance(backend, VolumesCapability):
        for name in ("volume_create", "volume_resize", "volume_destroy", "volume_usage"):
            assert getattr(cls, name) is not getattr(VolumesCapability, name), f"{cls.__name__}.{name} is missing"
    else:
        assert not backend.supports_volumes and not backend.supports_shared_write
    if isinstance(backend, EntryPointsCapability):
        for name in ("entry_points", "proxy_target"):
            assert getattr(cls, name) is not getattr(EntryPointsCapability, name), f"{cls.__name__}.{name} is missing"
    else:
        assert backend.entry_points(key=world.key(), state={}) == EntryPoints()
    if isinstance(backend, ClusterResizeCapability):
        assert backend.supports_cluster_resize and isinstance(backend, ClustersCapability)
        assert cls.cluster_resize is not ClusterResizeCapability.cluster_resize, (
            f"{cls.__name__}.cluster_resize is missing"
        )
    else:
        assert not backend.supports_cluster_resize
        with pytest.raises(PermanentBackendError):
            backend.cluster_resize(key=world.key(), state={}, spec=world.spec(nodes=2))
    if isinstance(backend, ImagesCapability):
        assert cls.image_save is not ImagesCapability.image_save, f"{cls.__name__}.image_save is missing"
    else:
        assert not backend.supports_image_save
        with pytest.raises(PermanentBackendError):
            backend.image_save(key=world.key(), state={}, repository="registry.invalid/users/u1/x", tag="v1")
    if isinstance(backend, SnapshotsCapability):
        for name in ("snapshot_create", "snapshot_restore", "snapshot_delete"):
            assert getattr(cls, name) is not getattr(SnapshotsCapability, name), f"{cls.__name__}.{name} is missing"
    else:
        assert not backend.supports_snapshots
        with pytest.raises(PermanentBackendError):
            backend.snapshot_create(key=world.key(), state={}, snapshot="snap-0")
    if isinstance(backend, GpuMetricsCapability):
        assert backend.supports_gpu_samples
        assert cls.gpu_samples is not GpuMetricsCapability.gpu_samples, f"{cls.__name__}.gpu_samples is missing"
    else:
        assert not backend.supports_gpu_samples
        assert backend.gpu_samples(machines=[(world.key(), {})], at=datetime.now(UTC)) == {}


def test_gpu_samples_leave_out_machines_never_created_and_number_cards_from_zero(world):
    """GpuMetricsCapability: unknown keys are left out, never an error; a machine's cards are 0…n-1.
    (A provider may have nothing to read for a running machine, a host without the driver: {}.)"""
    backend = world.backend
    if not backend.supports_gpu_samples:
        pytest.skip(f"{type(backend).__name__} offers no GPU samples")
    assert backend.gpu_samples(machines=[(world.key(), {})], at=datetime.now(UTC)) == {}
    key, state, _spec = running(world)
    samples = backend.gpu_samples(machines=[(key, state)], at=datetime.now(UTC))
    assert set(samples) <= {key}
    for cards in samples.values():
        assert [s.card for s in cards] == list(range(len(cards)))
        assert all(isinstance(s, GpuSample) for s in cards)


def test_the_proxy_has_nowhere_to_go_for_a_machine_never_created(world):
    for service in ("lab", "code", "app"):
        assert world.backend.proxy_target(key=world.key(), service=service) is None


# --- clusters --------------------------------------------------------------------------------------------


def test_a_cluster_is_one_machine_holding_cards_on_every_node(world):
    if not isinstance(world.backend, ClustersCapability):
        pytest.skip("no ClustersCapability: one node per machine")
    key, state, _spec = running(world, nodes=2, peer_nodes=(world.peer,), gpu_count=2)
    [machine] = listed(world.backend, key)
    assert machine.cards == 4
    world.backend.destroy(key=key, state={})
    wait_for(world, key, state, Observed.GONE)
    assert listed(world.backend, key) == []


def test_a_cluster_resize_is_all_or_nothing_and_a_repeat_changes_nothing(world):
    """ClusterResizeCapability: the same size changes nothing; a node that cannot join is a permanent
    error that leaves the cluster as it was; the last rank leaves and it runs on."""
    if not world.backend.supports_cluster_resize:
        pytest.skip("no ClusterResizeCapability: clusters keep their size")
    backend = world.backend
    key, state, spec = running(world, nodes=2, peer_nodes=(world.peer,), gpu_count=2)
    state = backend.cluster_resize(key=key, state=state, spec=spec)
    assert listed(backend, key)[0].cards == 4
    with pytest.raises(PermanentBackendError):
        backend.cluster_resize(
            key=key,
            state=state,
            spec=dataclasses.replace(spec, nodes=4, peer_nodes=(world.peer, "nowhere-1", "nowhere-2")),
        )
    assert listed(backend, key)[0].cards == 4
    assert backend.poll(key=key, state=state).state == Observed.RUNNING


# --- volumes ---------------------------------------------------------------------------------------------


@pytest.fixture
def volumes(world) -> ProvisioningBackend:
    if not world.backend.supports_volumes:
        pytest.skip("no volumes here")
    return world.backend


def test_volume_create_repeated_makes_one_and_destroy_counts_gone_as_done(world, volumes):
    key = world.key()
    state = volumes.volume_create(key=key, size_gb=1, owner_ref="user-1")
    assert isinstance(state, dict)
    assert isinstance(volumes.volume_create(key=key, size_gb=1, owner_ref="user-1"), dict)
    usage = volumes.volume_usage(key=key, state=state)
    assert usage is None or (isinstance(usage, int) and usage >= 0)
    volumes.volume_destroy(key=key, state=state)
    volumes.volume_destroy(key=key, state=state)
    volumes.volume_destroy(key=world.key(), state={})  # never created


def test_a_volume_only_grows(world, volumes):
    key = world.key()
    state = volumes.volume_create(key=key, size_gb=1, owner_ref="user-1")
    state = volumes.volume_resize(key=key, state=state, size_gb=2)
    with pytest.raises(PermanentBackendError):
        volumes.volume_resize(key=key, state=state, size_gb=1)
    volumes.volume_destroy(key=key, state=state)


def test_a_volume_files_dir_is_none_or_its_folder_which_goes_with_it(world, volumes):
    """``volume_files_dir``: None (the files are not on the console's host), or the volume's own folder
    there, whose files count in its usage and are deleted with it."""
    key = world.key()
    state = volumes.volume_create(key=key, size_gb=1, owner_ref="user-1")
    folder = volumes.volume_files_dir(key=key, state=state)
    if folder is None:
        volumes.volume_destroy(key=key, state=state)
        return
    assert folder.is_dir() and not folder.is_symlink()
    (folder / "a.bin").write_bytes(b"x" * 5000)
    usage = volumes.volume_usage(key=key, state=state)
    assert usage is None or usage >= 5000
    volumes.volume_destroy(key=key, state=state)
    assert not (folder / "a.bin").exists()
