"""metrics answers what the apps below ask of GPU use: the instance list's figure, the page's charts and
auto-stop's idle time (``instances.hooks.gpu_metrics``), the statement's idle waste (``billing.hooks.idle_waste``).
``MetricsConfig.ready()`` registers them (``wire``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime

from billing import hooks as billing_hooks
from instances import hooks as instance_hooks
from instances.hooks import GpuMetricsHooks
from metrics import selectors


class MetricsHooks(GpuMetricsHooks):
    def gpu_use(self, *, instance_ids: Iterable[uuid.UUID]) -> dict:
        return selectors.gpu_use_for(instance_ids)

    def detail_panels(self, *, instance) -> list[str]:
        # A machine that never ran has nothing to chart; a stopped one keeps its history.
        if instance.running_since is None and instance.status != "running":
            return []
        return ["metrics/_instance_charts.html"]

    def gpu_idle_seconds(self, *, running_since: dict[uuid.UUID, datetime | None], now: datetime) -> dict:
        return selectors.gpu_idle_seconds(running_since=running_since, now=now)

    def fleet_use(self) -> dict:
        return selectors.fleet_use()


def wire() -> None:
    """Register metrics' answers to the hooks of the apps below it."""
    instance_hooks.gpu_metrics.implement(MetricsHooks())
    billing_hooks.idle_waste.implement(selectors.idle_waste_for)
