"""The active catalogue (regions, GPU models, images) by slug, kept in each process for a few seconds.

Every launch names a region, a GPU model and an image: three queries on the hottest write path, for
rows staff change a few times a year. Each process keeps the active rows for
``INSTANCES_CATALOGUE_CACHE_S`` seconds. A save or delete in this process clears its copy at once
(signals, connected in ``InstancesConfig.ready``); other processes see the change within those
seconds. A launch in that window is placed at the price the user was shown on the page they loaded
before the change, which is the price they agreed to.

The objects are shared between requests: read them, never change them.
"""

from __future__ import annotations

import threading
import time

from django.conf import settings
from django.db import models

from core.memo import process_memo_register
from instances.models import GpuModel, Image, Region

CATALOGUE_MODELS: tuple[type[models.Model], ...] = (Region, GpuModel, Image)

_lock = threading.Lock()
_active: dict[type[models.Model], tuple[float, dict[str, models.Model]]] = {}


def catalogue_active(model: type[models.Model]) -> dict[str, models.Model]:
    """The active rows of ``model`` (one of ``CATALOGUE_MODELS``) by slug."""
    entry = _active.get(model)
    now = time.monotonic()
    if entry is not None and entry[0] > now:
        return entry[1]
    rows = {obj.slug: obj for obj in model.objects.filter(is_active=True)}
    with _lock:
        _active[model] = (now + settings.INSTANCES_CATALOGUE_CACHE_S, rows)
    return rows


def catalogue_cache_clear(sender=None, **kwargs) -> None:
    """Forget this process's copy (of ``sender`` only, when given): the next read queries again."""
    with _lock:
        if sender is None:
            _active.clear()
        else:
            _active.pop(sender, None)


process_memo_register(catalogue_cache_clear)
