"""What the instances services share, so the modules of the package import one way: the operation table
(``OPERATIONS``: stop, start, restart and release, each with its statuses and provider call), the
machine's spec as a provider is given it (``_spec``, with the keys still allowed in), the instance as a
task reads it (``_get``, a fixed statement), the money check before compute starts, and the quiet
provider calls of a give-up.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.postgres.expressions import ArraySubquery
from django.db.models import OuterRef
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from accounts.models import SSHKey
from billing.services import InsufficientFunds, launch_check
from core import sql
from core.tasks import enqueue_on_commit
from instances import hooks
from instances.errors import BudgetReached, FundsTooLow, LaunchInvalid, OperationNotAllowed
from instances.hooks import volume_hooks
from instances.lifecycle import ALLOWED
from instances.models import GpuModel, Image, Instance, InstanceSecret, Node, Region
from instances.tenancy import tenant_for
from providers import (
    AppLaunch,
    InstanceSpec,
    PermanentBackendError,
    ProvisioningBackend,
    RegistryLogin,
    SecretValue,
    TransientBackendError,
    get_backend,
)
from teams.access import Access, membership_access
from teams.models import Membership
from vault.selectors import registry_login_for, secret_values_for_boot

logger = logging.getLogger(__name__)


S = Instance.Status


def _funds_check(*, user, hourly_fen: int, instance: Instance | None = None) -> None:
    """Before compute starts (a launch; a start, of ``instance``): the money must cover it, and no
    spending guard (a budget's hard cap, an instance's own limit: ``hooks.spend_guard``, answered by
    an app above) may refuse it."""
    try:
        launch_check(user=user, extra_hourly_fen=hourly_fen)
    except InsufficientFunds as exc:
        raise FundsTooLow(str(exc)) from exc
    refusal = hooks.spend_guard(user=user, instance=instance)
    if refusal:
        raise BudgetReached(refusal)


def instance_hourly_price(
    *, gpu_model: GpuModel, gpu_count: int, node_count: int = 1, tier: str = Instance.Tier.ON_DEMAND
) -> int:
    """What it costs per hour running: every card of every node, at the model's card-hour price for ``tier``."""
    return gpu_model.card_hour_price_fen(tier) * gpu_count * node_count


def node_count_choices() -> tuple[int, ...]:
    """The cluster sizes offered: the allowed counts up to ``INSTANCES_MAX_NODES``."""
    return tuple(n for n in Instance.NODE_COUNTS if n <= settings.INSTANCES_MAX_NODES)


def _enqueue(task_name: str, instance_id) -> None:
    """Run ``instances.tasks.<task_name>`` on the instance once this transaction commits (by name: the
    tasks module sits above this one)."""
    enqueue_on_commit(f"instances.tasks.{task_name}", str(instance_id))


def app_launch_from(data: dict) -> AppLaunch | None:
    """The stored ``Instance.app_launch`` as the backend's dataclass (None for a plain instance)."""
    if not data:
        return None
    webui = app_launch_from(data.get("webui") or {})
    return AppLaunch(
        webui=webui,
        name=data["name"],
        argv=tuple(data["argv"]),
        image=data.get("image", ""),
        port=int(data.get("port", 8000)),
        env=tuple((str(k), str(v)) for k, v in data.get("env", [])),
        health_path=data.get("health_path", "/"),
        serves_base_path=bool(data.get("serves_base_path", True)),
        cpu=app_launch_from(data.get("cpu") or {}),
        image_slug=data.get("image_slug", ""),
        gpu_required=bool(data.get("gpu_required", True)),
    )


def _authorized_keys(instance: Instance) -> tuple[str, ...]:
    """The owner's chosen keys, then those ``hooks.authorized_keys`` adds (the SSH gateway's key for
    this instance, ``gateway.keys``): the gateway answers the hook, so instances never imports it."""
    return tuple(_ssh_public_keys(instance)) + tuple(hooks.authorized_keys(instance=instance))


def _spec(instance: Instance) -> InstanceSpec:
    return InstanceSpec(
        node=instance.node.name if instance.node else "",
        gpu_model=instance.gpu_model.slug,
        gpu_count=instance.cards_held,
        image=instance.image.slug,
        disk_gb=instance.disk_gb,
        ssh_public_keys=_authorized_keys(instance),
        region=instance.region.slug,
        owner_ref=f"user-{instance.owner_id}",
        app=app_launch_from(instance.app_launch),
        volumes=volume_hooks().mounts_for_boot(instance=instance),
        nodes=instance.node_count,
        peer_nodes=tuple(instance.extra_nodes or ()),
        interruptible=instance.tier == Instance.Tier.INTERRUPTIBLE,
        checkpoint_command=instance.checkpoint_command or "",
        pin=bool(instance.displaced_others),
        image_ref=instance.image_ref,
        tenant=tenant_for(account_id=instance.owner_id),
        # The cards' share of the node, or in no-GPU mode the small allowance the no-GPU price pays for.
        cpus=settings.INSTANCES_NO_GPU_CPUS
        if instance.no_gpu
        else float(instance.gpu_model.cpu_cores_per_card * instance.gpu_count),
        memory_gb=settings.INSTANCES_NO_GPU_MEMORY_GB
        if instance.no_gpu
        else instance.gpu_model.ram_gb_per_card * instance.gpu_count,
        image_bytes=instance.image.size_bytes,
        secrets=_secrets_for_boot(instance),
        image_login=_image_login_for_boot(instance),
    )


def _image_login_for_boot(instance: Instance) -> RegistryLogin | None:
    """The owner's saved login to the registry of an image they imported (bring your own image), for
    the engine's pull; None for the catalogue's and saved images, or when they saved none."""
    image = instance.image
    if not image.imported_from or not image.repository:
        return None
    host = image.repository.split("/", 1)[0]
    login = registry_login_for(owner_id=instance.owner_id, host=host)
    return RegistryLogin(host=host, username=login[0], password=login[1]) if login else None


def _secrets_for_boot(instance: Instance) -> tuple[SecretValue, ...]:
    """The owner's secrets chosen for ``instance``, decrypted for the boot whose spec is being built
    (create, start, restart, repair): the values exist in the clear only in that spec, on their way to
    the provider. ``_get`` read whether any is chosen with the instance, so a machine without secrets
    costs no query here (every boot builds a spec); with some, one for the choices and one for the values."""
    if getattr(instance, "secret_choice_ids", None) == []:
        return ()
    choices = dict(InstanceSecret.objects.filter(instance_id=instance.pk).values_list("secret_id", "env"))
    if not choices:
        return ()
    values = secret_values_for_boot(owner_id=instance.owner_id, secret_ids=choices)
    return tuple(
        SecretValue(name=name, value=value, env=choices[secret_id])
        for secret_id, (name, value) in sorted(values.items(), key=lambda item: item[1][0])
    )


def _secret_choices_write(*, instance: Instance, choices, replace: bool = False) -> None:
    """Record which of the owner's secrets ``instance`` gets at boot: ``choices`` are ``(secret, env)``
    pairs (``env``: also an environment variable). The secrets must be the instance's owner's: a team's
    instance takes the team's, a personal one its owner's (anything else is ``LaunchInvalid``, which
    the API's serializer has already turned into "does not exist"). ``replace``: the choice replaces
    the previous one; the machine gets it at its next start or restart."""
    pairs = {}
    for secret, env in choices:
        if secret.owner_id != instance.owner_id:
            raise LaunchInvalid(_("Choose secrets of the account that owns the instance."), field="secrets")
        pairs[secret.pk] = bool(env)
    if replace:
        InstanceSecret.objects.filter(instance_id=instance.pk).exclude(secret_id__in=pairs).delete()
    for secret_id, env in pairs.items():
        InstanceSecret.objects.update_or_create(instance_id=instance.pk, secret_id=secret_id, defaults={"env": env})


def _ssh_public_keys(instance: Instance) -> list[str]:
    """The public keys chosen at launch, less those of people who may no longer operate it.

    On a personal account the keys are the owner's, always allowed. On a team's they are its launcher's
    (``instance_launch`` takes only the actor's own): recomputed at every create, start and restart, so
    a launcher who left the team, or lost the role to launch, is not let in by the next boot. (The SSH
    gateway checks each connection as well.)
    """
    if instance.created_by_id is None or instance.created_by_id == instance.owner_id:
        keys = getattr(instance, "ssh_public_keys", None)  # read with the instance by ``_get``
        if keys is None:
            keys = instance.ssh_keys.values_list("public_key", flat=True)
        return list(keys)
    rows = list(instance.ssh_keys.order_by(*SSHKey._meta.ordering).values_list("public_key", "user_id"))
    people = {user_id for _key, user_id in rows if user_id != instance.owner_id}
    memberships = {
        m.user_id: m
        for m in Membership.objects.filter(team__account_id=instance.owner_id, user_id__in=people).only(
            "id", "role", "user_id", "team_id"
        )
    }
    allowed = {instance.owner_id} | {
        user_id
        for user_id in people
        if membership_access(membership=memberships.get(user_id), user_id=user_id, created_by_id=instance.created_by_id)
        == Access.OPERATE
    }
    return [key for key, user_id in rows if user_id in allowed]


def _get(instance_id) -> Instance | None:
    """The instance as a task works on it: with its catalogue rows, node and owner, the public keys its
    machine is built with, and the ids of the secrets chosen for it (in the same statement: every
    create, start and restart needs them, and most machines have no secret to read).

    A fixed statement (``core.sql``): every boot of every instance reads it, and compiling the ORM's
    five joins and subquery cost several times what running them does (3 ms of a launch's CPU:
    ``bench/sql_gain.py``). The ORM's query where the speed-up is off.
    """
    if not sql.enabled():
        keys = SSHKey.objects.filter(instances=OuterRef("pk")).order_by(*SSHKey._meta.ordering).values("public_key")
        chosen = InstanceSecret.objects.filter(instance=OuterRef("pk")).values("pk")
        return (
            Instance.objects.select_related("gpu_model", "image", "region", "node", "owner")
            .annotate(ssh_public_keys=ArraySubquery(keys), secret_choice_ids=ArraySubquery(chosen))
            .filter(pk=instance_id)
            .first()
        )
    user_model = get_user_model()
    through = Instance.ssh_keys.through
    layout = ((Instance, "i"), (GpuModel, "g"), (Image, "im"), (Region, "r"), (user_model, "u"), (Node, "n"))
    row = sql.fetch_one(
        f"SELECT {', '.join(sql.columns(m, a) for m, a in layout)}, ARRAY("  # noqa: S608 (names from _meta)
        f"SELECT k.public_key FROM {sql.table(SSHKey)} k JOIN {sql.table(through)} ik "
        f"ON ik.{through._meta.get_field('sshkey').column} = k.id "
        f"WHERE ik.{through._meta.get_field('instance').column} = i.id ORDER BY {sql.ordering(SSHKey, 'k')}), "
        f"ARRAY(SELECT c.id FROM {sql.table(InstanceSecret)} c WHERE c.{InstanceSecret._meta.get_field('instance').column} = i.id) "
        f"FROM {sql.table(Instance)} i JOIN {sql.table(GpuModel)} g ON g.id = i.gpu_model_id "
        f"JOIN {sql.table(Image)} im ON im.id = i.image_id JOIN {sql.table(Region)} r ON r.id = i.region_id "
        f"JOIN {sql.table(user_model)} u ON u.id = i.owner_id LEFT JOIN {sql.table(Node)} n ON n.id = i.node_id "
        "WHERE i.id = %s",
        [instance_id],
    )
    if row is None:
        return None
    instance, instance.gpu_model, instance.image, instance.region, instance.owner, instance.node = sql.from_joined_row(
        row, *layout
    )
    instance.ssh_public_keys, instance.secret_choice_ids = row[-2], row[-1]
    return instance


def _destroy_quietly(instance: Instance) -> None:
    """Make sure nothing is left at the provider; if it cannot answer now, the reconciler will."""
    try:
        get_backend(instance.backend_alias).destroy(key=instance.key, state=instance.backend_state)
    except (TransientBackendError, PermanentBackendError):
        logger.warning("destroy of %s deferred to the reconciler", instance.pk, exc_info=True)
    except Exception:
        # Called while settling an instance, often because the backend itself is what broke.
        logger.exception("destroy of %s raised; deferred to the reconciler", instance.pk)


def _stop_quietly(instance: Instance) -> None:
    try:
        get_backend(instance.backend_alias).stop(key=instance.key, state=instance.backend_state)
    except (TransientBackendError, PermanentBackendError):
        logger.warning("stop of %s failed", instance.pk, exc_info=True)
    except Exception:
        # As ``_destroy_quietly``: the reconciler stops a machine that runs on behind a stopped instance.
        logger.exception("stop of %s raised", instance.pk)


def _provider_stop(backend: ProvisioningBackend, instance: Instance) -> None:
    backend.stop(key=instance.key, state=instance.backend_state)  # its answer is not kept: the state stays


def _provider_start(backend: ProvisioningBackend, instance: Instance) -> dict:
    node = instance.node.name if instance.node else ""
    return backend.start(key=instance.key, state=instance.backend_state, node=node, spec=_spec(instance))


def _provider_restart(backend: ProvisioningBackend, instance: Instance) -> dict | None:
    return backend.restart(key=instance.key, state=instance.backend_state, spec=_spec(instance))


def _provider_release(backend: ProvisioningBackend, instance: Instance) -> None:
    backend.destroy(key=instance.key, state=instance.backend_state)


@dataclasses.dataclass(frozen=True)
class Operation:
    """An operation a user asks for and a worker carries out at the provider.

    Asking (``_operation_request``) moves the instance to ``busy`` from any status ``ALLOWED`` lets go
    there, and enqueues ``task`` on commit; the task calls ``instance_operation_execute``, which does
    ``provider`` and then settles the instance at ``then``, or (None) polls it until the provider's
    truth settles it (``instance_sync``). Messages are ``gettext_noop`` ids, translated when used.
    """

    busy: str  # the status while it is under way, and the only one its task acts in
    done: frozenset[str]  # where asking again changes nothing: already under way, or done
    requested: str  # the reason recorded when the caller gives none
    refused: str  # why it cannot be asked now: a whole sentence with a ``%(status)s`` slot ("": never)
    task: str  # the task of ``instances.tasks`` that carries it out
    # The backend's call: the machine's new state to keep, or None to keep the one it has.
    provider: Callable[[ProvisioningBackend, Instance], dict | None]
    # Where the provider's permanent refusal leaves the instance, and why (a message with the provider's
    # words as ``%(r)s``; "" for its words alone). None: the refusal fails the task, which settles it.
    refusal: tuple[str, str] | None
    then: tuple[str, str] | None = None  # where it settles, and why, once the provider has done it
    places: bool = False  # it needs cards again (placement, quota, balance), as a launch does

    @property
    def sources(self) -> frozenset[str]:
        return frozenset(src for src, targets in ALLOWED.items() if self.busy in targets)


OPERATIONS = {
    # GPUs freed, disk kept (and billed as storage).
    "stop": Operation(
        busy=S.STOPPING,
        done=frozenset({S.STOPPING, S.STOPPED}),
        requested=gettext_noop("Stop requested"),
        refused=gettext_noop("An instance that is %(status)s cannot be stopped."),
        task="instance_stop_task",
        provider=_provider_stop,
        refusal=(S.LOST, ""),
    ),
    # Placed on a node again, or refused and left stopped with why.
    "start": Operation(
        busy=S.STARTING,
        done=frozenset({S.STARTING, S.RUNNING}),
        requested=gettext_noop("Start requested; placed on %(node)s"),
        refused=gettext_noop("An instance that is %(status)s cannot be started."),
        task="instance_start_task",
        provider=_provider_start,
        refusal=(S.STOPPED, gettext_noop("Start failed: %(r)s")),
        places=True,
    ),
    # A reboot in place, keeping the GPUs (and their meter).
    "restart": Operation(
        busy=S.RESTARTING,
        done=frozenset({S.RESTARTING}),
        requested=gettext_noop("Restart requested"),
        refused=gettext_noop("An instance that is %(status)s cannot be restarted."),
        task="instance_restart_task",
        provider=_provider_restart,
        refusal=(S.LOST, ""),
    ),
    # The machine and its disk destroyed; billing closes at the request. Every live status may release.
    "release": Operation(
        busy=S.RELEASING,
        done=frozenset({S.RELEASING, S.RELEASED}),
        requested=gettext_noop("Release requested"),
        refused="",
        task="instance_release_task",
        provider=_provider_release,
        refusal=None,
        then=(S.RELEASED, gettext_noop("Released; disk deleted")),
    ),
}


def _operation_name(op: Operation) -> str:
    return next(name for name, known in OPERATIONS.items() if known is op)


# The operation under way in each of its busy statuses (what the sync re-drives).
_UNDER_WAY = {op.busy: op for op in OPERATIONS.values()}


def _refuse(instance: Instance, message: str) -> None:
    """Refuse an operation; ``message`` is a whole translated sentence with a ``%(status)s`` slot.

    Whole sentences, not a verb slotted into one: word order and the verb's form differ by language.
    """
    raise OperationNotAllowed(message % {"status": instance.get_status_display()})
