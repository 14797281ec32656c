"""Provisioning backends, chosen per region by alias: ``PROVISIONING_BACKENDS[alias]``.

Like Django's storage and e-mail backends: a dotted path in settings, a small base class
(``base.ProvisioningBackend``), a loader that imports and caches, and a simulated backend shipped
beside the real ones (``fake.FakeBackend``) for development and tests.
"""

from __future__ import annotations

import threading

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from instances.backends.base import (
    AppLaunch,
    BackendError,
    EntryPoints,
    InstanceSpec,
    MachineInfo,
    NodeInfo,
    Observation,
    Observed,
    PermanentBackendError,
    ProvisioningBackend,
    TransientBackendError,
    VolumeMount,
)

__all__ = [
    "AppLaunch",
    "BackendError",
    "EntryPoints",
    "InstanceSpec",
    "MachineInfo",
    "NodeInfo",
    "Observation",
    "Observed",
    "PermanentBackendError",
    "ProvisioningBackend",
    "TransientBackendError",
    "VolumeMount",
    "get_backend",
]

_cache: dict[str, ProvisioningBackend] = {}
_lock = threading.Lock()


def get_backend(alias: str = "default") -> ProvisioningBackend:
    """The backend configured under ``alias``, imported once per process."""
    backend = _cache.get(alias)
    if backend is not None:
        return backend
    with _lock:
        backend = _cache.get(alias)
        if backend is None:
            try:
                config = settings.PROVISIONING_BACKENDS[alias]
            except KeyError as exc:
                raise ImproperlyConfigured(f"PROVISIONING_BACKENDS has no backend {alias!r}.") from exc
            cls = import_string(config["BACKEND"])
            backend = cls(alias=alias, options=dict(config.get("OPTIONS", {})))
            _cache[alias] = backend
    return backend


def backend_aliases() -> list[str]:
    return list(settings.PROVISIONING_BACKENDS)


@receiver(setting_changed)
def _reset_backends(*, setting: str, **kwargs) -> None:
    # override_settings(PROVISIONING_BACKENDS=…) in a test must reach the next get_backend().
    if setting == "PROVISIONING_BACKENDS":
        _cache.clear()
