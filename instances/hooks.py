"""What the instances app asks of the apps above it: each question a hook (``core.hooks``), declared here.

Volumes, GPU metrics, budgets, ports, the SSH gateway and the marketplace all sit above instances, so
instances imports none of their modules; at launch, at every boot, at each transition and on its pages
it asks these hooks, and those apps answer from their ``wiring`` modules (``manage.py hooks`` lists who).
Each declaration's body is the answer of a console without that app: no volumes, no charts, nothing
refused, no ports, no extra keys.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime

from django.db.models import QuerySet
from django.utils.translation import gettext as _

from core.hooks import Hook, hook
from instances.errors import LaunchInvalid
from instances.models import Instance
from providers import VolumeMount


class VolumeHooks:
    """No volumes: launches take none, machines boot with none mounted. Subclasses offer them."""

    # The choices of how a volume is mounted, as ``(value, label)``, and the launch form's default.
    mode_choices: Sequence[tuple[str, str]] = ()
    default_mode = "rw"

    def attach_at_launch(self, *, user, instance: Instance, volumes: Iterable) -> None:
        """Attach ``volumes`` (``(volume, mount_path, mode)`` triples) to ``instance``, which is being
        launched: called inside the launch's transaction, before the machine is created, so a refusal
        (an ``InstanceError``) rolls the whole launch back."""
        if volumes:
            raise LaunchInvalid(_("Volumes are not offered in that region."))

    def mounts_for_boot(self, *, instance: Instance) -> tuple[VolumeMount, ...]:
        """The volumes ``instance`` mounts as it boots now (create, start, restart, repair): the spec's
        ``volumes``. Detaches requested while it ran take effect here."""
        return ()

    def mounts(self, *, instance: Instance) -> list:
        """The instance's attachments for its page: each with ``mount_path``, ``volume`` (``name``,
        ``size_gb``), ``volume_id`` and ``get_mode_display``."""
        return []

    def attachable(self, *, user) -> Iterable:
        """The user's volumes that can be attached now, each with ``pk``, ``name``, ``size_gb``,
        ``region_id`` and ``region`` (the launch form's choices)."""
        return []

    def owned(self, *, user) -> QuerySet:
        """Every volume of ``user``, the queryset the API's launch field looks ids up in (another user's id
        "does not exist")."""
        # With no volumes app there is no volume model: an empty queryset (of any model) answers every
        # id with "does not exist", which is the truth.
        return Instance.objects.none()


class GpuMetricsHooks:
    """No metrics: the list shows no utilisation, the page no charts."""

    def gpu_use(self, *, instance_ids: Iterable[uuid.UUID]) -> dict:
        """For the list: per instance id (already the reader's own), an object with ``now_pct`` (the
        recent average utilisation of its cards, or None) and ``sparkline`` (SVG polyline points);
        instances without recent samples are left out. One query for the whole page."""
        return {}

    def gpu_idle_seconds(self, *, running_since: dict[uuid.UUID, datetime | None], now: datetime) -> dict:
        """For auto-stop: per instance id (id -> when it last booted), how long all its cards have been
        idle by the stored samples; instances it cannot judge (no recent samples) are left out, so
        they are never stopped for idleness on this account. One or two queries for all."""
        return {}

    def fleet_use(self) -> dict:
        """For the staff fleet page: ``{"models": {gpu_model_id: use}, "nodes": {node_id: pct}}``, each
        ``use`` with ``now_pct`` and a 7-day ``sparkline``; empty without metrics."""
        return {"models": {}, "nodes": {}}

    def detail_panels(self, *, instance) -> list[str]:
        """Templates the instance page includes below its connection card (each gets the page's
        context, with ``instance``)."""
        return []


volumes: Hook[VolumeHooks] = Hook(
    VolumeHooks,
    name="instances.hooks.volumes",
    about="volumes to attach at launch, mounts at every boot, the instance page's list",
)
"""Volumes to attach at launch, mounts at every boot, the instance page's list (storage answers)."""

gpu_metrics: Hook[GpuMetricsHooks] = Hook(
    GpuMetricsHooks,
    name="instances.hooks.gpu_metrics",
    about="the list's utilisation figure and sparkline, the page's charts, auto-stop's idle time, the staff fleet's use",
)
"""The list's utilisation figure, the page's charts, auto-stop's idle time (metrics answers)."""


def volume_hooks() -> VolumeHooks:
    """The volumes app's answers (``volumes``), or none."""
    return volumes.get()


def gpu_metrics_hooks() -> GpuMetricsHooks:
    """The metrics app's answers (``gpu_metrics``), or none."""
    return gpu_metrics.get()


@hook(about="refuse a launch or a start while a hard-capped budget, or the instance's own limit, is reached")
def spend_guard(*, user, instance: Instance | None = None) -> str | None:
    """Why compute may not start now for ``user`` (a launch; a start, of ``instance``), or None: a
    hard-capped budget reached this month, the instance's own spending limit. Asked at every launch
    and start, after the money check; a reason refuses it (``BudgetReached``). Without an answer,
    nothing beyond the money is checked."""
    return None


@hook(about="declare the ports asked for at launch, in the launch's transaction")
def ports_at_launch(*, instance: Instance, ports: list[int]) -> None:
    """Declare ``ports`` (checked numbers, asked for at launch) on ``instance``, inside the launch's
    transaction, so their URLs are there when the machine runs. Without an answer a launch asking for
    ports is refused before anything is made."""
    raise LaunchInvalid(_("This console serves no ports of your own."), field="ports")


@hook(about="keys added to the owner's at every create, start and restart: the instance's gateway key")
def authorized_keys(*, instance: Instance) -> Iterable[str]:
    """Public keys added to the owner's chosen ones at every create, start and restart of ``instance``
    (the SSH gateway's key for it). Without an answer, the owner's keys alone."""
    return ()


@hook(many=True, about='called in each instance transition\'s transaction: "your deployment is ready / failed"')
def transition(*, instance: Instance, src: str, dst: str) -> None:
    """Called inside each transition's transaction, after its event row: ``instance`` moved from
    ``src`` to ``dst`` (the marketplace tells a deployment's owner it is ready or failed). Must be
    cheap for the transitions it ignores: it runs on every one."""


@hook(
    many=True, about='templates of higher apps on the instance page ("stop this one after ¥X", the link to its files)'
)
def detail_panels(*, instance: Instance) -> Sequence[str]:
    """Templates of the apps above that the instance page includes below its connection card (each
    gets the page's context, with ``instance``): "stop this one after ¥X", the link to its files.
    Asked only while the instance is not released."""
    return ()
