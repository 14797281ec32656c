"""metrics answers the instances app's pages (``instances.gpu_metrics``): the list's figure, the page's charts."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime

from instances.gpu_metrics import GpuMetricsHooks
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
