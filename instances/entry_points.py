"""How the owner reaches a running machine (JupyterLab, VS Code, SSH, a deployment's app), as its provider
said, saved on the instance.

Pages and the API never ask the provider: on Kubernetes that is an API call per running instance per
request, paid by every list and detail read. The worker asks instead, when a machine boots (the sync that
moves it to RUNNING saves the answer in the same update, see ``running_changes``), and the reconciler asks
again for the running instances whose saved answer is missing, from an earlier boot or older than
``INSTANCES_ENTRY_POINTS_REFRESH_S`` (``instances_entry_points_refresh``).

Saved answers are shown only while they belong to the current boot (``entry_points_saved``): a machine
started again may listen on other ports, and no link is better than a dead one.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.models import F, Q
from django.utils import timezone

from instances.models import Instance
from providers import BackendError, ProvisioningBackend, get_backend

logger = logging.getLogger(__name__)

NONE = {"web": [], "ssh_port": None, "ssh_user": ""}


def entry_points_ask(*, backend: ProvisioningBackend, instance: Instance) -> dict | None:
    """What the provider offers for ``instance`` now, as saved on it; None when it cannot say."""
    try:
        offered = backend.entry_points(key=instance.key, state=instance.backend_state)
    except BackendError:
        logger.warning("entry points of %s unavailable; the reconciler asks again", instance.pk, exc_info=True)
        return None
    except Exception:
        # Asked while the instance boots: a broken backend must not stop it from running (and billing).
        logger.exception("entry points of %s raised; the reconciler asks again", instance.pk)
        return None
    saved = {"web": list(offered.web), "ssh_port": offered.ssh_port, "ssh_user": offered.ssh_user}
    if offered.ssh_host:
        saved["ssh_host"] = offered.ssh_host
    return saved


def running_changes(*, backend: ProvisioningBackend, instance: Instance) -> dict:
    """The fields to save with the transition to RUNNING: the entry points of the machine that just
    booted (``instance_transition`` stamps them with the moment it runs). Nothing when the provider
    cannot say: the saved ones then belong to an earlier boot, are not shown, and are asked again."""
    offered = entry_points_ask(backend=backend, instance=instance)
    return {} if offered is None else {"entry_points": offered}


def entry_points_saved(instance: Instance) -> dict:
    """The saved entry points of a running ``instance``, when they belong to its current boot; else none."""
    asked = instance.entry_points_at
    if instance.status != Instance.Status.RUNNING or asked is None:
        return NONE
    if instance.running_since is not None and asked < instance.running_since:
        return NONE
    return {**NONE, **(instance.entry_points or {})}


def _stale(now: datetime) -> Q:
    refresh_s = settings.INSTANCES_ENTRY_POINTS_REFRESH_S
    return (
        Q(entry_points_at__isnull=True)
        | Q(entry_points_at__lt=F("running_since"))
        | Q(entry_points_at__lt=now - timedelta(seconds=refresh_s))
    )


def instance_entry_points_refresh(*, instance: Instance) -> bool:
    """Ask the provider again and save the answer, if the instance is still in the same boot. True when saved."""
    try:
        backend = get_backend(instance.backend_alias)
    except ImproperlyConfigured:
        return False
    offered = entry_points_ask(backend=backend, instance=instance)
    if offered is None:
        return False
    # Compare-and-set on the boot: a stop or restart since the question makes the answer an old one.
    return bool(
        Instance.objects.filter(
            pk=instance.pk, status=Instance.Status.RUNNING, running_since=instance.running_since
        ).update(entry_points=offered, entry_points_at=timezone.now())
    )


def instances_entry_points_refresh(*, alias: str, now: datetime | None = None) -> int:
    """The reconciler's step for backend ``alias``: refresh the stale entry points of its running
    instances (see the module's docstring). Returns how many were saved."""
    now = now or timezone.now()
    stale = Instance.objects.filter(backend_alias=alias, status=Instance.Status.RUNNING).filter(_stale(now))
    saved = 0
    for instance in stale.only("pk", "status", "backend_alias", "backend_state", "running_since"):
        saved += instance_entry_points_refresh(instance=instance)
    return saved
