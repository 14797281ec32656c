"""Loading the configured real-name provider (``IDENTITY_REAL_NAME_PROVIDER``), once per process."""

from __future__ import annotations

from functools import cache

from django.conf import settings
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

from identity.realname.base import RealNameProvider


@cache
def provider_get() -> RealNameProvider | None:
    """The provider, or None where none is configured (individuals' checks are then not offered)."""
    config = settings.IDENTITY_REAL_NAME_PROVIDER
    if not config.get("BACKEND"):
        return None
    return import_string(config["BACKEND"])(**config.get("OPTIONS", {}))


def _reset(*, setting: str, **kwargs) -> None:
    if setting == "IDENTITY_REAL_NAME_PROVIDER":
        provider_get.cache_clear()


setting_changed.connect(_reset)
