"""What the instances app asks of GPU metrics (its pages, and auto-stop's idle judgement), answered by the app named in ``INSTANCES_GPU_METRICS_HOOKS``.

GPU metrics live in an app above this one (``metrics`` samples every card and stores the series), so
the instance list and page import none of its modules; they ask these hooks, as launch asks
``INSTANCES_VOLUME_HOOKS`` for volumes. This base class shows nothing (the default without metrics);
``metrics.hooks.MetricsHooks`` fills it in.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable
from datetime import datetime

from django.conf import settings
from django.utils.module_loading import import_string


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


_cache: dict[str, GpuMetricsHooks] = {}
_lock = threading.Lock()


def gpu_metrics_hooks() -> GpuMetricsHooks:
    """The hooks ``INSTANCES_GPU_METRICS_HOOKS`` names, imported once per path."""
    path = settings.INSTANCES_GPU_METRICS_HOOKS
    hooks = _cache.get(path)
    if hooks is None:
        with _lock:
            hooks = _cache.setdefault(path, import_string(path)())
    return hooks
