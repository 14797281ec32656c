"""Launch: validate a ``LaunchRequest``, reserve cards and record the instance in one transaction; a worker
then creates the machine (``instance_provision``).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop, ngettext

from accounts.models import SSHKey
from core.messages import reason as stored
from identity.errors import RealNameRequired
from identity.services import real_name_check
from instances import hooks
from instances.errors import LaunchInvalid, RealNameMissing
from instances.hooks import volume_hooks
from instances.lifecycle import ALLOWED, instance_events_write, instance_notify
from instances.members import member_limits_check
from instances.models import GpuModel, Image, Instance, InstanceClone, Region, Snapshot
from instances.quota import quota_check
from instances.services.common import (
    S,
    _enqueue,
    _funds_check,
    _get,
    _secret_choices_write,
    _spec,
    instance_hourly_price,
    node_count_choices,
)
from instances.services.fleet import _nodes_ensure
from instances.services.placement import _gpus_reserve_for, _gpus_reserve_nodes_for
from instances.services.sync import _launch_fail, instance_sync
from providers import AppLaunch, Observed, PermanentBackendError, TransientBackendError, backend_aliases, get_backend
from teams.models import TeamEvent
from teams.services import team_event_record


@dataclasses.dataclass(frozen=True, kw_only=True)
class LaunchRequest:
    """What a launch asks for: the page's form, the API's serializer, a deployment and the tests build one.

    ``user`` is the account that owns the machine and pays (a person's, or a team's); ``actor`` the
    person who launches it (``user`` when None).
    """

    user: Any
    region: Region
    gpu_model: GpuModel
    gpu_count: int  # cards on each node
    image: Image
    disk_gb: int
    ssh_keys: Iterable[SSHKey] = ()  # the actor's own
    name: str = ""  # empty: "<model>-<date>-<time>"
    app: AppLaunch | None = None  # a server to run beside the entry points (a deployment's)
    volumes: Iterable = ()  # (volume, mount_path, mode) triples
    node_count: int = 1  # > 1: a cluster of that many distinct nodes
    ports: Iterable[int] = ()  # HTTP ports the owner will serve
    tier: str = Instance.Tier.ON_DEMAND
    checkpoint_command: str = ""  # run in an interruptible instance's grace period
    actor: Any = None
    secrets: Iterable = ()  # (secret, env) pairs: the owner's secrets the machine gets at every boot


def instance_launch(launch: LaunchRequest, /) -> Instance:
    """Validate, reserve cards on a node and record the instance; a worker creates the machine.

    ``user`` is the account that owns it and pays (a person's, or a team's); ``actor`` the person who
    launches it (``Instance.created_by``; ``user`` when not given). On a team's account the actor's own
    limits apply too (``instances.members``), the SSH keys are the actor's, and the team's audit log
    records the launch.

    ``ports`` are HTTP ports the owner will serve, declared in the same transaction by the ports app
    (``hooks.ports_at_launch``), so their URLs are there when the machine runs.

    ``app`` is a server the machine runs beside its entry points (a one-click deployment's); a region
    whose provider cannot run it refuses here, before anything is reserved.

    Refused before anything is created when the choice is invalid, over quota, without capacity or
    without the balance to run it for the minimum runway. Nothing is billed until it is running.
    ``volumes`` are ``(volume, mount_path, mode)`` triples attached in the same transaction by the
    volumes app (``hooks.volumes``; storage's rules), so the machine boots with them mounted.

    ``node_count`` > 1 makes a cluster: ``gpu_count`` cards on each of that many distinct nodes,
    priced, billed and counted against quota as ``node_count × gpu_count`` cards.

    ``tier``: on-demand (the default) preempts interruptible instances when no free cards are left;
    interruptible is cheaper and may be preempted, running ``checkpoint_command`` in the grace period.
    """
    user, region, gpu_model, gpu_count = launch.user, launch.region, launch.gpu_model, launch.gpu_count
    image, disk_gb, ssh_keys, name, app = launch.image, launch.disk_gb, launch.ssh_keys, launch.name, launch.app
    volumes, node_count, ports, tier = launch.volumes, launch.node_count, launch.ports, launch.tier
    checkpoint_command, actor = launch.checkpoint_command, launch.actor
    if tier not in Instance.Tier.values:
        raise LaunchInvalid(_("Choose on-demand or interruptible."), field="tier")
    checkpoint_command = (checkpoint_command or "").strip()
    if len(checkpoint_command) > 500 or "\x00" in checkpoint_command:
        raise LaunchInvalid(_("The checkpoint command is at most 500 characters."), field="checkpoint_command")
    if gpu_count not in Instance.GPU_COUNTS:
        raise LaunchInvalid(_("Choose 1, 2, 4 or 8 GPUs."), field="gpu_count")
    allowed_nodes = node_count_choices()
    if node_count not in allowed_nodes:
        raise LaunchInvalid(
            _("Choose %(choices)s nodes.") % {"choices": ", ".join(str(n) for n in allowed_nodes)},
            field="node_count",
        )
    if not (settings.INSTANCES_DISK_MIN_GB <= disk_gb <= settings.INSTANCES_DISK_MAX_GB):
        raise LaunchInvalid(
            _("The disk must be between %(min)d and %(max)d GB.")
            % {"min": settings.INSTANCES_DISK_MIN_GB, "max": settings.INSTANCES_DISK_MAX_GB},
            field="disk_gb",
        )
    if region.backend_alias not in backend_aliases():
        raise LaunchInvalid(_("That region is not available."), field="region")
    for obj, field, label in (
        (region, "region", _("That region is not available.")),
        (gpu_model, "gpu_model", _("That GPU model is not available.")),
        (image, "image", _("That image is not available.")),
    ):
        # A saved image is never in the catalogue: it is launchable by its own account once READY.
        saved = field == "image" and image.owner_id is not None
        if (not saved and not obj.is_active) or (
            saved and (image.owner_id != user.pk or image.status != Image.Status.READY)
        ):
            raise LaunchInvalid(label, field=field)
    if not get_backend(region.backend_alias).has_image(image.slug, image_ref=image.pinned_ref):
        # The owner's choice is never replaced by another image: a region without it refuses the launch.
        raise LaunchInvalid(
            _("The image %(image)s is not available in %(region)s.") % {"image": image.name, "region": region.name},
            field="image",
        )
    actor = actor if actor is not None else user
    try:
        real_name_check(user=actor)  # the person launching, also on a team's account
    except RealNameRequired as exc:
        raise RealNameMissing(exc.message) from exc
    ssh_keys = list(ssh_keys)
    if any(key.user_id != actor.pk for key in ssh_keys):
        raise LaunchInvalid(_("Choose SSH keys from your own account."), field="ssh_keys")
    ports = sorted(set(ports))
    if any(not isinstance(port, int) or not 1 <= port <= 65535 for port in ports):
        raise LaunchInvalid(_("A port is a number from 1 to 65535."), field="ports")
    if len(ports) > 16:
        raise LaunchInvalid(_("An instance serves at most %(n)d ports.") % {"n": 16}, field="ports")
    if ports and not hooks.ports_at_launch.implemented:
        raise LaunchInvalid(_("This console serves no ports of your own."), field="ports")
    name = (name or "").strip() or f"{gpu_model.slug}-{timezone.now():%m%d-%H%M%S}"
    if len(name) > 64:
        raise LaunchInvalid(_("Names are at most 64 characters."), field="name")
    max_nodes = get_backend(region.backend_alias).max_nodes
    if node_count > max_nodes:
        raise LaunchInvalid(
            ngettext(
                "Instances in %(region)s run on %(max)d node at most; choose fewer nodes or another region.",
                "Instances in %(region)s run on %(max)d nodes at most; choose fewer nodes or another region.",
                max_nodes,
            )
            % {"region": region.name, "max": max_nodes},
            field="node_count",
        )
    if app is not None:
        why = get_backend(region.backend_alias).app_check(app)
        if why:
            raise LaunchInvalid(
                _("This app cannot run in %(region)s: %(why)s.") % {"region": region.name, "why": why}, field="region"
            )
    hourly = instance_hourly_price(gpu_model=gpu_model, gpu_count=gpu_count, node_count=node_count, tier=tier)
    _nodes_ensure(region=region)
    instance_id = uuid.uuid4()  # named before the row exists: the instances it preempts point at it

    with transaction.atomic():
        if image.owner_id is not None:
            # A saved image, read above: held against a delete until this launch commits, and read
            # again under the lock (``image_delete`` locks it before it counts the instances using it).
            held = Image.objects.select_for_update(no_key=True).filter(pk=image.pk, status=Image.Status.READY)
            if not list(held.values_list("pk", flat=True)):
                raise LaunchInvalid(_("That image is not available."), field="image")
        quota_check(user=user, gpu_model=gpu_model, count=gpu_count * node_count)
        member_limits_check(account=user, member_id=actor.pk, count=gpu_count * node_count, launching=True)
        _funds_check(user=user, hourly_fen=hourly)
        # NoCapacity here rolls everything back: the user gets the reason and nothing was created.
        if node_count == 1:
            node, displaced = _gpus_reserve_for(
                region=region,
                gpu_model=gpu_model,
                count=gpu_count,
                tier=tier,
                instance_id=instance_id,
                owner_id=user.pk,
            )
            extra = []
        else:
            (head, *others), displaced = _gpus_reserve_nodes_for(
                region=region,
                gpu_model=gpu_model,
                count=gpu_count,
                nodes=node_count,
                tier=tier,
                instance_id=instance_id,
                owner_id=user.pk,
            )
            node, extra = head, [n.name for n in others]
        now = timezone.now()
        # Nobody else can see the row before this transaction commits, so the walk through
        # requested → scheduling → provisioning is written at once (the path the table allows).
        path = [("", S.REQUESTED), (S.REQUESTED, S.SCHEDULING), (S.SCHEDULING, S.PROVISIONING)]
        assert all(dst in ALLOWED[src] for src, dst in path[1:])
        instance = Instance(
            id=instance_id,
            owner=user,
            created_by=actor,
            name=name,
            region=region,
            gpu_model=gpu_model,
            gpu_count=gpu_count,
            node_count=node_count,
            extra_nodes=extra,
            image=image,
            image_ref=image.pinned_ref,
            disk_gb=disk_gb,
            backend_alias=region.backend_alias,
            app_launch=dataclasses.asdict(app) if app is not None else {},
            hourly_price_fen=hourly,
            tier=tier,
            checkpoint_command=checkpoint_command,
            displaced_others=displaced,
            status=S.PROVISIONING,
            status_reason=stored(gettext_noop("Placed on %(node)s"), node=", ".join([node.name, *extra])),
            node_id=node.pk,
            created_at=now,
            status_changed_at=now,
        )
        instance.save(force_insert=True)
        if ssh_keys:
            instance.ssh_keys.set(ssh_keys)
        if volumes:
            volume_hooks().attach_at_launch(user=user, instance=instance, volumes=volumes)
        if ports:
            hooks.ports_at_launch(instance=instance, ports=ports)
        if launch.secrets:
            _secret_choices_write(instance=instance, choices=launch.secrets)
        reasons = [
            stored(gettext_noop("Launched by %(who)s"), who=actor.email),
            stored(gettext_noop("Finding a node")),
            instance.status_reason,
        ]
        instance_events_write(
            moves=[(instance.pk, old, new, reason) for (old, new), reason in zip(path, reasons, strict=True)], at=now
        )
        if actor.pk != user.pk:  # a team's (a person's own launch has no audit log: spare the query)
            team_event_record(
                account=user,
                actor=actor,
                action=TeamEvent.Action.INSTANCE_LAUNCHED,
                target=name,
                details={"instance": str(instance.pk), "gpus": gpu_count * node_count, "gpu_model": gpu_model.slug},
            )
        _enqueue("instance_provision_task", instance.pk)
        transaction.on_commit(lambda: instance_notify(instance))
    # As written, with its region, model, image and owner at hand: reading it back would cost a five-table join.
    return instance


def instance_provision(*, instance_id) -> bool:
    """Task body: have the provider create the machine placed at launch, then see whether it is up.
    True while it boots (poll it again soon).

    Repeatable: the machine is named by the instance's key, so a second run (a redelivered task, or a
    rerun after a worker died between the provider's answer and our update) finds the same machine.
    """
    instance = _get(instance_id)
    if instance is None or instance.status != S.PROVISIONING:
        return False
    if instance.displaced_others and Instance.objects.filter(preempted_for=instance.pk, status=S.PREEMPTING).exists():
        # Its cards are still with the machines it preempted, in their grace period: the last of them
        # to go off enqueues this task again (``instances.capacity.preemption``); until then, poll.
        return True
    backend = get_backend(instance.backend_alias)
    try:
        spec = _spec(instance)
        disk_from = clone_disk_from(instance=instance)
        if disk_from is not None:
            spec = dataclasses.replace(spec, disk_from=disk_from)
        state = backend.create(key=instance.key, spec=spec)
    except PermanentBackendError as exc:
        _launch_fail(instance=instance, reason=str(exc))
        return False
    observation = backend.poll(key=instance.key, state=state)
    if observation.state == Observed.RUNNING:
        # Up at once (a fast provider): the state is saved with the move to running, one write for both.
        instance.backend_state = state
        return instance_sync(instance_id=instance.pk, instance=instance, observation=observation)
    if Instance.objects.filter(pk=instance.pk, status=S.PROVISIONING).update(backend_state=state):
        instance.backend_state = state
        return instance_sync(instance_id=instance.pk, instance=instance, observation=observation)
    return instance_sync(instance_id=instance.pk)


def clone_disk_from(*, instance: Instance) -> dict | None:
    """The ``InstanceSpec.disk_from`` of a clone being created (None for any other instance). Raises
    ``TransientBackendError`` while its snapshot is being made (the provision task retries) and
    ``PermanentBackendError`` when it failed or was deleted (the launch fails, nothing billed)."""
    source = InstanceClone.objects.select_related("snapshot__instance").filter(instance_id=instance.pk).first()
    if source is None:
        return None
    snapshot = source.snapshot
    if snapshot.status == Snapshot.Status.CREATING:
        raise TransientBackendError("The snapshot to clone from is still being made.")
    if snapshot.status not in (Snapshot.Status.READY, Snapshot.Status.RESTORING):
        raise PermanentBackendError("The snapshot to clone from failed or was deleted.")
    return {"key": snapshot.instance.key, "snapshot": snapshot.slug, "state": snapshot.provider_state}
