"""The simulated cloud: the embedded default backend, and the one tests use.

It behaves like a provider, not like a mock. Its fleet of nodes lives in its own tables, so web,
worker and beat processes all see one cloud; machines take ``BOOT_DELAY_S`` to boot; a node refuses
a machine that does not fit; a lost node takes its machines with it. Faults are injected through
``OPTIONS`` (in settings, or per test with ``override_settings``)::

    "OPTIONS": {
        "FLEET": [{"region": "cn-north-1", "gpu": "a800-80g", "nodes": 4, "cards": 8}, ...],
        "BOOT_DELAY_S": 20,            # seconds from create/start/restart to RUNNING
        "FAIL_CREATE_TRANSIENT": 0.0,  # share of creates refused with a transient error (nothing made)
        "FAIL_CREATE_PERMANENT": 0.0,  # share of creates refused for good
        "LOSE_CREATE_RESPONSE": 0.0,   # share of creates that make the machine, then time out
        "HANG_CREATE": 0.0,            # share of machines that never finish booting
        "UNREACHABLE": False,          # every call fails transiently; poll says UNKNOWN
        "UNREACHABLE_FILE": None,      # the same while this file exists: an outage switched on and off
                                       # from outside, for every process at once (the chaos soak)
        "LOST_NODES": [],              # names of nodes that have failed (their machines are gone)
        "DRAINING_NODES": [],          # names of nodes being drained (machines run on; no new ones)
        "DISK_FOLLOWS": False,         # a machine's disk survives its node (the instance directory lives
                                       # on shared storage): ``start`` boots one lost with its node elsewhere
        "SEED": None,                  # seed the fault dice for repeatable runs
        "BLOCK_NODES": 32,             # nodes per network block (leaf switch) in each FLEET group
        "VOLUMES": True,               # offers volumes (block storage: one writer unless SHARED_WRITE)
        "SHARED_WRITE": False,         # volumes may be mounted read-write by several machines at once
        "FAIL_VOLUME_CREATE": 0.0,     # share of volume creates refused for good
        "VOLUMES_DIR": None,           # a directory on the console's host keeping volumes' files (one
                                       # folder per volume, for the console's file browser); None: no files
        "BUG_IN": [],                  # contract methods that raise SimulatedBug: an error no one declared
        "PULL_BYTES_PER_S": 0,         # how fast a node pulls an image it has not cached (0: at once,
                                       # no "pulling" stage); the size is the spec's ``image_bytes``,
        "IMAGE_BYTES": 0,              # or this when the spec does not say
        "PRECACHED": [],               # images (digests or slugs) every node of a new fleet holds
        "FAIL_PULL": 0.0,              # share of pulls that fail half-way (the boot fails: nothing billed)
        "IMAGE_SAVE_CHANGE_BYTES": 268435456,  # what a saved image adds to the one its machine booted
        "FAIL_IMAGE_SAVE": 0.0,        # share of saves as image refused for good
        "DISK_USED_BYTES": 1073741824, # what a machine's disk holds, so what a snapshot of it takes
        "FAIL_SNAPSHOT": 0.0,          # share of snapshots refused for good
    }

A boot goes through the contract's stages (``BOOT_STAGES``) as a container host's would: placed,
pulling the image (unless the node has it: each node keeps the images it pulled, ``SimulatedNode.images``,
reported by ``nodes``), image ready, container started, servers answering, then running. The pull takes
``image_bytes / PULL_BYTES_PER_S`` seconds, reported as bytes done; the other stages share
``BOOT_DELAY_S`` (10 %, 20 %, 30 %, 40 %).

GPU samples (``gpu_samples``, for the console's charts) come from ``providers.simulated.gpus``: a
plausible series per card, with idle stretches, the same every time for a machine and a tick.

A cluster (``spec.nodes`` > 1) is one machine spread over the head node and ``spec.peer_nodes``,
``cards`` on each: every node must fit it, it holds cards on all of them while powered on, and losing
any of its nodes loses it (a distributed job cannot run with a hole in it). A running cluster grows
or shrinks by whole nodes (``cluster_resize``): joining nodes must fit, all of them or none; the head
never leaves, and the cluster keeps running.

Volumes live in the simulator's own table (``SimulatedVolume``): created, grown and deleted like a
cloud's disks, with a size and a used-bytes figure (``volume_write`` sets it), and the volumes a
machine was booted with are recorded on its spec. With ``VOLUMES_DIR``, a volume's files (uploaded with
the console's file browser) are kept in ``<VOLUMES_DIR>/<key>`` and count in its usage; its machines
are rows, so they never see them.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from providers.base import (
    BOOT_FAILED,
    BuildLimits,
    ClusterResizeCapability,
    ClustersCapability,
    GpuMetricsCapability,
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
    VolumeMount,
    VolumesCapability,
    image_cache_key,
)
from providers.simulated.gpus import simulated_sample
from providers.simulated.models import SimulatedMachine, SimulatedNode, SimulatedVolume

STATE_VERSION = 1
VOLUME_STATE_VERSION = 1


class SimulatedBug(RuntimeError):
    """What a method listed in ``BUG_IN`` raises: neither transient nor permanent, as a bug is."""


def _mounts_json(volumes: tuple[VolumeMount, ...]) -> list[dict]:
    return [{"key": v.key, "path": v.path, "read_only": v.read_only} for v in volumes]


class SimulatedBackend(
    ClustersCapability,
    ClusterResizeCapability,
    VolumesCapability,
    GpuMetricsCapability,
    ImagesCapability,
    ImageBuildCapability,
    SnapshotsCapability,
    ProvisioningBackend,
):
    """The simulated cloud (see the module's docstring); no entry points: there is nothing to log in to."""

    max_nodes = 1024  # 1,024 nodes × 8 cards: an 8,192-card cluster
    simulated = True  # its machines are rows in its own tables (providers.simulated.models)

    def __init__(self, *, alias: str, options: dict | None = None) -> None:
        super().__init__(alias=alias, options=options)
        seed = self.options.get("SEED")
        self._dice = random.Random(seed)

    # --- helpers -------------------------------------------------------------------------------------

    def _roll(self, option: str) -> bool:
        rate = float(self.options.get(option, 0) or 0)
        return rate > 0 and self._dice.random() < rate

    def _bug(self, method: str) -> None:
        if method in (self.options.get("BUG_IN") or ()):
            raise SimulatedBug(f"simulated bug in {method}()")

    def _reachable(self) -> None:
        switch = self.options.get("UNREACHABLE_FILE")
        if self.options.get("UNREACHABLE") or (switch and os.path.exists(switch)):
            raise TransientBackendError("The provider's API did not answer in time.")

    def _boot_plan(self, *, node, machine_spec: dict) -> tuple[dict, object]:
        """A boot starting now on ``node``: its pull (none when the node holds the image), whether the
        pull fails (``FAIL_PULL``), and when the machine is up. Returns the plan and ``ready_at``."""
        now = timezone.now()
        key = machine_spec.get("image_key", "")
        size = int(machine_spec.get("image_bytes") or self.options.get("IMAGE_BYTES") or 0)
        rate = float(self.options.get("PULL_BYTES_PER_S") or 0)
        cached = node is None or key in (node.images or [])
        pull_s = 0.0 if cached or rate <= 0 else size / rate
        plan = {"at": now.isoformat(), "pull_s": pull_s, "bytes": size, "fails": pull_s > 0 and self._roll("FAIL_PULL")}
        return plan, now + timedelta(seconds=pull_s + float(self.options.get("BOOT_DELAY_S", 0)))

    def _boot_stage(self, machine, now) -> tuple[str, int, int]:
        """Where the machine's boot is at ``now``: (stage, bytes pulled, bytes in all)."""
        plan = (machine.spec or {}).get("boot") or {}
        if not plan:
            return "", 0, 0
        delay = float(self.options.get("BOOT_DELAY_S", 0))
        elapsed = (now - datetime.fromisoformat(plan["at"])).total_seconds()
        pull_s = float(plan.get("pull_s") or 0)
        if elapsed < 0.1 * delay:
            return "placed", 0, 0
        if elapsed < 0.1 * delay + pull_s:
            done = int(plan["bytes"] * min(1.0, (elapsed - 0.1 * delay) / pull_s))
            return "pulling", done, int(plan["bytes"])
        after = elapsed - 0.1 * delay - pull_s
        if after < 0.2 * delay:
            return "image_ready", 0, 0
        if after < 0.5 * delay:
            return "container_started", 0, 0
        return "servers_answering", 0, 0

    def _node_cache(self, machine) -> None:
        """The node keeps the image its machine pulled (the next boot there needs no pull)."""
        key = (machine.spec or {}).get("image_key", "")
        if machine.node is not None and key and key not in (machine.node.images or []):
            with transaction.atomic():
                node = SimulatedNode.objects.select_for_update().get(pk=machine.node.pk)
                if key not in node.images:
                    node.images = [*node.images, key]
                    node.save(update_fields=["images"])
            machine.node.images = [*(machine.node.images or []), key]

    def _machines(self):
        return SimulatedMachine.objects.filter(backend_alias=self.alias)

    def _ensure_fleet(self) -> None:
        fleet = self.options.get("FLEET") or []
        if not fleet or SimulatedNode.objects.filter(backend_alias=self.alias).exists():
            return
        per_block = max(1, int(self.options.get("BLOCK_NODES", 32)))
        rows = [
            SimulatedNode(
                backend_alias=self.alias,
                name=f"{group['region']}-{group['gpu']}-{index:02d}",
                region_slug=group["region"],
                gpu_slug=group["gpu"],
                cards=int(group.get("cards", 8)),
                block=f"{group['region']}-{group['gpu']}-b{(index - 1) // per_block + 1}",
                images=list(self.options.get("PRECACHED") or ()),
            )
            for group in fleet
            for index in range(1, int(group.get("nodes", 1)) + 1)
        ]
        SimulatedNode.objects.bulk_create(rows, ignore_conflicts=True)

    def _used_cards(self, node, *, key: str = "") -> int:
        # A cluster holds its cards on its head and on each of its peers. Which clusters have ``node``
        # among their peers is read here, not asked of the database: a JSON containment lookup is
        # PostgreSQL's alone (elsewhere it raises NotSupportedError, and no launch could be placed).
        # One query for both: the machines headed here and every cluster.
        # ``key``'s own machine does not compete with itself (a create sent twice).
        rows = (
            self._machines()
            .filter(Q(node=node) | Q(spec__nodes__gt=1), power="on")
            .exclude(key=key)
            .values_list("node_id", "cards", "spec__peers")
        )
        return sum(cards for head, cards, peers in rows if head == node.pk or node.name in (peers or ()))

    def _peers(self, machine) -> list:
        names = (machine.spec or {}).get("peers") or []
        return list(SimulatedNode.objects.filter(backend_alias=self.alias, name__in=names)) if names else []

    def _place_all(self, *, machine_cards: int, head: str, peers: tuple[str, ...], key: str = ""):
        """Place a machine on ``head`` and, for a cluster, on every peer: all fit, or nothing is placed.

        Nodes are locked in name order, so two clusters placed at once cannot deadlock on each other.
        """
        names = [head, *peers]
        if len(set(names)) != len(names):
            raise PermanentBackendError("A cluster needs distinct nodes.")
        placed = {name: self._place(machine_cards=machine_cards, node_name=name, key=key) for name in sorted(names)}
        return placed[head]

    def _place(self, *, machine_cards: int, node_name: str, key: str = ""):
        """Lock the node and check the machine fits, as a real host would refuse an oversubscription."""
        node = self._node_locked(node_name)
        if node is None and self.options.get("FLEET"):
            self._ensure_fleet()  # a fresh cloud: build the fleet on first use
            node = self._node_locked(node_name)
        if node is None:
            raise PermanentBackendError(f"Node {node_name} does not exist.")
        if self._is_lost(node) or self._is_draining(node):
            raise PermanentBackendError(f"Node {node_name} is out of service.")
        if self._used_cards(node, key=key) + machine_cards > node.cards:
            raise PermanentBackendError(f"Node {node_name} has fewer than {machine_cards} free GPUs.")
        return node

    def _node_locked(self, name: str) -> SimulatedNode | None:
        return SimulatedNode.objects.select_for_update().filter(backend_alias=self.alias, name=name).first()

    def _machine(self, key: str) -> SimulatedMachine | None:
        """The machine named ``key``, with its node."""
        return self._machines().select_related("node").filter(key=key).first()

    @property
    def disk_follows_node_loss(self) -> bool:  # type: ignore[override]
        return bool(self.options.get("DISK_FOLLOWS", False))

    def _machine_lost(self, machine) -> bool:
        """Whether a node of the machine (its head, or a cluster's peer) has failed under it."""
        if machine.node is not None and self._is_lost(machine.node):
            return True
        return any(self._is_lost(peer) for peer in self._peers(machine))

    def _is_lost(self, node) -> bool:
        return node.is_lost or node.name in (self.options.get("LOST_NODES") or ())

    def _is_draining(self, node) -> bool:
        return node.is_draining or node.name in (self.options.get("DRAINING_NODES") or ())

    def _health(self, node) -> tuple[bool, str]:
        if self._is_lost(node):
            return False, "down"
        if self._is_draining(node):
            return False, "draining"
        return True, ""

    def _state(self, machine) -> dict:
        return {"v": STATE_VERSION, "machine": machine.pk, "node": machine.node.name if machine.node else ""}

    def _observe(self, machine, now) -> Observation:
        if machine.node is not None and self._is_lost(machine.node):
            return Observation(Observed.GONE, detail=f"node {machine.node.name} was lost")
        for peer in self._peers(machine) if machine.power == "on" else ():
            if self._is_lost(peer):
                return Observation(Observed.GONE, detail=f"node {peer.name} of the cluster was lost")
        if machine.power == "off":
            return Observation(Observed.STOPPED)
        stage, done, total = self._boot_stage(machine, now) if machine.ready_at is not None else ("", 0, 0)
        plan = (machine.spec or {}).get("boot") or {}
        if stage == "pulling" and plan.get("fails") and done * 2 >= total:
            image = (machine.spec or {}).get("image_ref") or (machine.spec or {}).get("image", "")
            return Observation(
                Observed.PENDING,
                stage=BOOT_FAILED,
                detail=f"pulling {image} failed: the registry closed the connection (simulated)",
            )
        if stage not in ("", "placed", "pulling"):
            self._node_cache(machine)
        if machine.ready_at is None or machine.ready_at > now:
            return Observation(
                Observed.PENDING,
                detail="booting",
                stage=stage,
                pull_bytes_done=done if stage == "pulling" else 0,
                pull_bytes_total=total if stage == "pulling" else 0,
            )
        idle_from = max(machine.last_active_at, machine.ready_at)
        return Observation(
            Observed.RUNNING,
            idle_seconds=max(0, int((now - idle_from).total_seconds())),
            stage="servers_answering" if plan else "",
        )

    # --- GPU samples ----------------------------------------------------------------------------------

    def gpu_samples(self, *, machines: Sequence[tuple[str, dict]], at: datetime) -> dict[str, list[GpuSample]]:
        self._bug("gpu_samples")
        self._reachable()
        now = timezone.now()
        keys = [key for key, _state in machines]
        samples: dict[str, list[GpuSample]] = {}
        for machine in self._machines().filter(key__in=keys, power="on").select_related("node"):
            booted = machine.ready_at is not None and machine.ready_at <= now
            if not booted or (machine.node is not None and self._is_lost(machine.node)):
                continue  # booting, or lost with its node: nothing runs on its cards
            cards = machine.cards * (1 + len((machine.spec or {}).get("peers") or []))
            gpu_model = (machine.spec or {}).get("gpu_model") or (machine.node.gpu_slug if machine.node else "")
            samples[machine.key] = [
                simulated_sample(key=machine.key, card=card, at=at, gpu_model=gpu_model) for card in range(cards)
            ]
        return samples

    # --- the contract ---------------------------------------------------------------------------------

    def nodes(self) -> list[NodeInfo]:
        self._bug("nodes")
        self._reachable()
        self._ensure_fleet()
        return [
            NodeInfo(
                name=n.name,
                region=n.region_slug,
                gpu_model=n.gpu_slug,
                cards=n.cards,
                healthy=self._health(n)[0],
                detail=self._health(n)[1],
                block=n.block,
                images=tuple(n.images or ()),
            )
            for n in SimulatedNode.objects.filter(backend_alias=self.alias).order_by("name")
        ]

    def create(self, *, key: str, spec: InstanceSpec) -> dict:
        self._bug("create")
        self._reachable()
        # A create sent twice finds its machine through the key's unique index (below), not a read first.
        if self._roll("FAIL_CREATE_TRANSIENT"):
            raise TransientBackendError("The provider is busy; try again shortly.")
        if self._roll("FAIL_CREATE_PERMANENT"):
            raise PermanentBackendError(f"The provider could not allocate {spec.gpu_count} × {spec.gpu_model}.")
        peers = self._cluster_peers(spec)
        try:
            with transaction.atomic():
                node = self._place_all(machine_cards=spec.gpu_count, head=spec.node, peers=peers, key=key)
                machine_spec = {
                    "image_key": image_cache_key(image_ref=spec.image_ref, image=spec.image),
                    "image_ref": spec.image_ref,
                    "image_bytes": spec.image_bytes,
                }
                plan, ready_at = self._boot_plan(node=node, machine_spec=machine_spec)
                machine = SimulatedMachine(
                    backend_alias=self.alias,
                    key=key,
                    node=node,
                    cards=spec.gpu_count,
                    spec={
                        **machine_spec,
                        "boot": plan,
                        "gpu_model": spec.gpu_model,
                        "image": spec.image,
                        "disk_gb": spec.disk_gb,
                        "ssh_keys": len(spec.ssh_public_keys),
                        "owner": spec.owner_ref,
                        "volumes": _mounts_json(spec.volumes),
                        "nodes": spec.nodes,
                        "peers": list(peers),
                        **({"cloned_from": dict(spec.disk_from)} if spec.disk_from else {}),
                    },
                    ready_at=None if self._roll("HANG_CREATE") else ready_at,
                )
                machine.save(force_insert=True)
        except IntegrityError:  # a twin request created it first: that machine is ours
            return self._state(self._machines().select_related("node").get(key=key))
        if self._roll("LOSE_CREATE_RESPONSE"):
            raise TransientBackendError("The provider accepted the request but its answer was lost.")
        return self._state(machine)

    def _cluster_peers(self, spec: InstanceSpec) -> tuple[str, ...]:
        if spec.nodes < 1 or spec.nodes > self.max_nodes:
            raise PermanentBackendError(f"A machine spans 1 to {self.max_nodes} nodes here, not {spec.nodes}.")
        if len(spec.peer_nodes) != spec.nodes - 1:
            raise PermanentBackendError(
                f"A cluster of {spec.nodes} nodes needs {spec.nodes - 1} other nodes, not {len(spec.peer_nodes)}."
            )
        return tuple(spec.peer_nodes)

    def start(self, *, key: str, state: dict, node: str, spec: InstanceSpec | None = None) -> dict:
        self._bug("start")
        self._reachable()
        with transaction.atomic():
            machine = self._machines().select_for_update(of=("self",)).select_related("node").filter(key=key).first()
            # Lost with its node: gone, unless its disk lives on storage that survives the node.
            lost = machine is not None and machine.power == "on" and self._machine_lost(machine)
            if machine is None or (lost and not self.disk_follows_node_loss):
                raise PermanentBackendError("The machine no longer exists.")
            if machine.power == "on" and not lost:
                return self._state(machine)
            if lost:  # its cards on the nodes that still run go back before it is placed again
                machine.node, machine.spec = None, {**machine.spec, "peers": []}
                machine.save(update_fields=["node", "spec"])
            nodes = int((machine.spec or {}).get("nodes") or 1)
            if nodes > 1 and spec is None:
                raise PermanentBackendError("A cluster starts only with its spec (where its other nodes are).")
            peers = self._cluster_peers(spec) if nodes > 1 and spec is not None else ()
            # The spec says how many cards this run takes (0 without GPU); a start without one takes its own.
            if spec is not None:
                machine.cards = spec.gpu_count
            machine.node = self._place_all(machine_cards=machine.cards, head=node, peers=peers)
            machine.spec = {**machine.spec, "peers": list(peers)}
            machine.power = "on"
            plan, machine.ready_at = self._boot_plan(node=machine.node, machine_spec=machine.spec or {})
            machine.spec = {**machine.spec, "boot": plan}
            machine.last_active_at = timezone.now()
            if spec is not None:  # booted with the volumes attached now
                machine.spec = {**machine.spec, "volumes": _mounts_json(spec.volumes)}
            machine.save(update_fields=["node", "power", "ready_at", "last_active_at", "spec", "cards"])
        return self._state(machine)

    def stop(self, *, key: str, state: dict) -> dict:
        self._bug("stop")
        self._reachable()
        with transaction.atomic():
            machine = self._machines().select_for_update(of=("self",)).select_related("node").filter(key=key).first()
            if machine is None or (machine.node is not None and self._is_lost(machine.node)):
                raise PermanentBackendError("The machine no longer exists.")
            if machine.power == "on":
                # Powered off, it gives its GPUs back to the node (a cluster: to all of them); the disk stays.
                machine.power = "off"
                machine.node = None
                machine.spec = {**machine.spec, "peers": []}
                machine.save(update_fields=["power", "node", "spec"])
        return self._state(machine)

    def restart(self, *, key: str, state: dict, spec: InstanceSpec | None = None) -> dict:
        self._bug("restart")
        self._reachable()
        with transaction.atomic():
            machine = self._machines().select_for_update(of=("self",)).select_related("node").filter(key=key).first()
            if machine is None or machine.power != "on" or (machine.node and self._is_lost(machine.node)):
                raise PermanentBackendError("Only a running machine can be restarted.")
            plan, machine.ready_at = self._boot_plan(node=machine.node, machine_spec=machine.spec or {})
            machine.spec = {**machine.spec, "boot": plan}
            machine.last_active_at = timezone.now()
            if spec is not None:
                machine.spec = {**machine.spec, "volumes": _mounts_json(spec.volumes)}
            machine.save(update_fields=["ready_at", "last_active_at", "spec"])
        return self._state(machine)

    def cluster_resize(self, *, key: str, state: dict, spec: InstanceSpec) -> dict:
        """Peers join (each must fit, all or none: the nodes are locked in name order as at create) or
        the last ones leave (their cards go back at once, as at a stop); the head stays, and so does its
        boot: the machine runs on. Records each size on the spec (``resizes``), as a provider's log would."""
        self._bug("cluster_resize")
        self._reachable()
        with transaction.atomic():
            machine = self._machines().select_for_update(of=("self",)).select_related("node").filter(key=key).first()
            if machine is None or machine.power != "on" or self._machine_lost(machine):
                raise PermanentBackendError("Only a running cluster can be resized.")
            if machine.node is None or spec.node != machine.node.name:
                raise PermanentBackendError("A cluster keeps its head node (rank 0) when it is resized.")
            peers = list(self._cluster_peers(spec))
            if spec.nodes < 2:
                raise PermanentBackendError("A cluster keeps at least two nodes.")
            old = list((machine.spec or {}).get("peers") or [])
            if peers == old:
                return self._state(machine)
            if peers[: len(old)] != old and old[: len(peers)] != peers:
                raise PermanentBackendError("Nodes join after the others, and the last ones leave first.")
            joining = [name for name in peers if name not in old]
            if machine.node.name in joining or len(set(peers)) != len(peers):
                raise PermanentBackendError("A cluster needs distinct nodes.")
            for name in sorted(joining):
                self._place(machine_cards=machine.cards, node_name=name, key=key)
            machine.spec = {
                **machine.spec,
                "nodes": spec.nodes,
                "peers": peers,
                "resizes": [*(machine.spec or {}).get("resizes", []), spec.nodes],
            }
            machine.save(update_fields=["spec"])
        return self._state(machine)

    def checkpoint(self, *, key: str, state: dict, command: str, grace_s: int) -> bool:
        """Records the command on the machine's spec (``checkpoints``), as a host would have run it: the
        disk that keeps its output is kept by ``stop``. Only a powered-on machine can run it."""
        self._bug("checkpoint")
        self._reachable()
        with transaction.atomic():
            machine = self._machines().select_for_update().filter(key=key).first()
            if machine is None or machine.power != "on" or not command:
                return False
            runs = [*(machine.spec or {}).get("checkpoints", []), {"command": command, "grace_s": grace_s}]
            machine.spec = {**machine.spec, "checkpoints": runs}
            machine.save(update_fields=["spec"])
        return True

    def destroy(self, *, key: str, state: dict) -> None:
        self._bug("destroy")
        self._reachable()
        self._machines().filter(key=key).delete()

    def poll(self, *, key: str, state: dict) -> Observation:
        self._bug("poll")
        if self.options.get("UNREACHABLE"):
            return Observation(Observed.UNKNOWN, detail="provider unreachable")
        machine = self._machine(key)
        if machine is None:
            return Observation(Observed.GONE)
        return self._observe(machine, timezone.now())

    def image_save(self, *, key: str, state: dict, repository: str, tag: str) -> dict:
        """A simulated save: the digest follows from the machine, the repository, the tag and how many
        times it was saved (a save again is a new image, as a real commit is); the size is the image it
        booted plus ``IMAGE_SAVE_CHANGE_BYTES``. Recorded on the machine's spec (``saved_images``)."""
        self._bug("image_save")
        self._reachable()
        if self._roll("FAIL_IMAGE_SAVE"):
            raise PermanentBackendError("The machine could not be saved as an image.")
        with transaction.atomic():
            machine = self._machines().select_for_update(of=("self",)).select_related("node").filter(key=key).first()
            if machine is None or (machine.node is not None and self._is_lost(machine.node)):
                raise PermanentBackendError("The machine no longer exists.")
            saved = list((machine.spec or {}).get("saved_images") or [])
            seed = f"{key}|{repository}|{tag}|{len(saved)}"
            digest = "sha256:" + hashlib.sha256(seed.encode()).hexdigest()
            base = int((machine.spec or {}).get("image_bytes") or self.options.get("IMAGE_BYTES") or 0)
            size = base + int(self.options.get("IMAGE_SAVE_CHANGE_BYTES", 268435456))
            saved.append({"repository": repository, "tag": tag, "digest": digest, "size_bytes": size})
            machine.spec = {**machine.spec, "saved_images": saved}
            machine.save(update_fields=["spec"])
            base = (machine.spec or {}).get("image_ref") or ""
        # No layer to read: the recipe names the base and says so (a real save lists the changes).
        recipe = f"# Saved as: {repository}@{digest}\n# The simulated cloud keeps no layer to read changes off.\n"
        return {"digest": digest, "size_bytes": size, "recipe": recipe + (f"\nFROM {base}\n" if base else "")}

    def image_build(
        self, *, recipe: str, repository: str, tag: str, tenant: Tenant, limits: BuildLimits, progress=None
    ) -> dict:
        """A simulated build: a line of log per step of ``recipe``; a step ``RUN false`` (or the option
        ``FAIL_IMAGE_BUILD``) fails it with the log; the digest follows from the recipe, repository and
        tag, the size from ``IMAGE_BYTES`` plus ``IMAGE_SAVE_CHANGE_BYTES``."""
        self._bug("image_build")
        self._reachable()
        steps = [line.strip() for line in recipe.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        log = "".join(f"STEP {n}/{len(steps)}: {step}\n" for n, step in enumerate(steps, 1))
        if progress is not None:
            progress(log)
        if self._roll("FAIL_IMAGE_BUILD") or any(step == "RUN false" for step in steps):
            raise PermanentBackendError('The build failed: error building at STEP "RUN false": exit status 1')
        digest = "sha256:" + hashlib.sha256(f"{recipe}|{repository}|{tag}".encode()).hexdigest()
        size = int(self.options.get("IMAGE_BYTES") or 0) + int(self.options.get("IMAGE_SAVE_CHANGE_BYTES", 268435456))
        return {"digest": digest, "size_bytes": size, "log": log + f"COMMIT {repository}:{tag}\n"}

    # --- snapshots: recorded on the machine's spec (``snapshots``, ``restored_from``) -------------------

    def _disk_machine(self, key: str):
        machine = self._machines().select_for_update(of=("self",)).select_related("node").filter(key=key).first()
        if machine is None or (machine.node is not None and self._is_lost(machine.node)):
            raise PermanentBackendError("The machine no longer exists.")
        return machine

    def snapshot_create(self, *, key: str, state: dict, snapshot: str, progress=None) -> dict:
        """A simulated snapshot: it takes what the disk holds (``DISK_USED_BYTES``); nothing is copied."""
        self._bug("snapshot_create")
        self._reachable()
        if self._roll("FAIL_SNAPSHOT"):
            raise PermanentBackendError("The disk could not be snapshotted.")
        with transaction.atomic():
            machine = self._disk_machine(key)
            snapshots = dict((machine.spec or {}).get("snapshots") or {})
            if snapshot not in snapshots:
                size = int(self.options.get("DISK_USED_BYTES", 2**30))
                snapshots[snapshot] = {"size_bytes": size}
                machine.spec = {**machine.spec, "snapshots": snapshots}
                machine.save(update_fields=["spec"])
        if progress:
            progress(100)
        return {"size_bytes": int(snapshots[snapshot]["size_bytes"])}

    def snapshot_restore(self, *, key: str, state: dict, snapshot: str, snapshot_state: dict) -> None:
        self._bug("snapshot_restore")
        self._reachable()
        with transaction.atomic():
            machine = self._disk_machine(key)
            if machine.power == "on":
                raise PermanentBackendError("The machine is running: stop it before restoring a snapshot.")
            if snapshot not in ((machine.spec or {}).get("snapshots") or {}):
                raise PermanentBackendError("This snapshot no longer exists.")
            machine.spec = {**machine.spec, "restored_from": snapshot}
            machine.save(update_fields=["spec"])

    def snapshot_delete(self, *, key: str, state: dict, snapshot: str, snapshot_state: dict) -> None:
        self._reachable()
        with transaction.atomic():
            machine = self._machines().select_for_update(of=("self",)).filter(key=key).first()
            if machine is None:
                return  # its machine is gone, and its snapshots with it
            snapshots = dict((machine.spec or {}).get("snapshots") or {})
            if snapshots.pop(snapshot, None) is not None:
                machine.spec = {**machine.spec, "snapshots": snapshots}
                machine.save(update_fields=["spec"])

    def ssh_target(self, *, key: str) -> SshTarget | None:
        """A running simulated machine has no sshd: the SSH gateway answers for it as a built-in shell."""
        machine = self._machine(key)
        if machine is None or self._observe(machine, timezone.now()).state != Observed.RUNNING:
            return None
        return SshTarget(user="root", simulated=True)

    def machines(self) -> list[MachineInfo]:
        self._bug("machines")
        self._reachable()
        now = timezone.now()
        return [
            MachineInfo(
                key=m.key,
                node=m.node.name if m.node else "",
                cards=m.cards * (1 + len((m.spec or {}).get("peers") or [])),
                observed=self._observe(m, now).state,
            )
            for m in self._machines().select_related("node")
        ]

    # --- volumes ----------------------------------------------------------------------------------------

    @property
    def supports_volumes(self) -> bool:  # type: ignore[override]
        return bool(self.options.get("VOLUMES", True))

    @property
    def supports_shared_write(self) -> bool:  # type: ignore[override]
        return bool(self.options.get("SHARED_WRITE", False))

    def _volumes(self):
        if not self.supports_volumes:
            raise PermanentBackendError("This region has no volumes.")
        return SimulatedVolume.objects.filter(backend_alias=self.alias)

    @staticmethod
    def _volume_state(volume) -> dict:
        return {"v": VOLUME_STATE_VERSION, "volume": volume.pk, "size_gb": volume.size_gb}

    def volume_create(self, *, key: str, size_gb: int, owner_ref: str = "") -> dict:
        self._bug("volume_create")
        self._reachable()
        existing = self._volumes().filter(key=key).first()
        if existing is not None:
            return self._volume_state(existing)
        if self._roll("FAIL_VOLUME_CREATE"):
            raise PermanentBackendError(f"The provider could not allocate a {size_gb} GB volume.")
        try:
            with transaction.atomic():
                volume = SimulatedVolume.objects.create(backend_alias=self.alias, key=key, size_gb=size_gb)
        except IntegrityError:  # a twin request created it first
            volume = self._volumes().get(key=key)
        return self._volume_state(volume)

    def volume_resize(self, *, key: str, state: dict, size_gb: int) -> dict:
        self._bug("volume_resize")
        self._reachable()
        with transaction.atomic():
            volume = self._volumes().select_for_update().filter(key=key).first()
            if volume is None:
                raise PermanentBackendError("The volume no longer exists.")
            if size_gb < volume.size_gb:
                raise PermanentBackendError("A volume can only grow.")
            if size_gb != volume.size_gb:
                volume.size_gb = size_gb
                volume.save(update_fields=["size_gb"])
        return self._volume_state(volume)

    def volume_destroy(self, *, key: str, state: dict) -> None:
        self._bug("volume_destroy")
        self._reachable()
        folder = self._files_folder(key)
        if folder is not None and not folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)
        self._volumes().filter(key=key).delete()

    def volume_usage(self, *, key: str, state: dict) -> int | None:
        self._bug("volume_usage")
        if self.options.get("UNREACHABLE"):
            return None
        used = self._volumes().filter(key=key).values_list("used_bytes", flat=True).first()
        folder = self._files_folder(key)
        if used is None or folder is None or not folder.is_dir() or folder.is_symlink():
            return used
        return used + sum(
            (Path(top) / name).lstat().st_size
            for top, _dirs, names in os.walk(folder)
            for name in names
            if (Path(top) / name).is_file() and not (Path(top) / name).is_symlink()
        )

    def _files_folder(self, key: str) -> Path | None:
        root = self.options.get("VOLUMES_DIR")
        if not root:
            return None
        if not key or "/" in key or key.startswith(".") or len(key) > 64:
            raise PermanentBackendError(f"invalid volume key {key!r}")
        return Path(root) / key

    def volume_files_dir(self, *, key: str, state: dict) -> Path | None:
        """``<VOLUMES_DIR>/<key>`` (made on first use) for a volume that exists; None without VOLUMES_DIR."""
        folder = self._files_folder(key)
        if folder is None or not self._volumes().filter(key=key).exists():
            return None
        folder.mkdir(parents=True, exist_ok=True)
        return None if folder.is_symlink() else folder

    # --- the simulator's own levers (tests, demos) -----------------------------------------------------

    def volume_write(self, *, key: str, used_bytes: int) -> None:
        """Files on volume ``key`` now take ``used_bytes`` (as a machine writing to it would make them)."""
        self._volumes().filter(key=key).update(used_bytes=used_bytes)

    def node_lose(self, *, name: str) -> None:
        """A node fails: its machines are gone, and it takes no new ones."""
        SimulatedNode.objects.filter(backend_alias=self.alias, name=name).update(is_lost=True)

    def node_drain(self, *, name: str, draining: bool = True) -> None:
        """A node is drained for maintenance: its machines run on, it takes no new ones."""
        SimulatedNode.objects.filter(backend_alias=self.alias, name=name).update(is_draining=draining)

    def machine_checkpoints(self, *, key: str) -> list[str]:
        """The checkpoint commands machine ``key`` ran, oldest first (what a test reads back)."""
        spec = self._machines().filter(key=key).values_list("spec", flat=True).first() or {}
        return [run["command"] for run in spec.get("checkpoints", [])]

    def machine_touch(self, *, key: str) -> None:
        """Someone used the machine's GPUs just now (resets its idle clock)."""
        self._machines().filter(key=key).update(last_active_at=timezone.now())
