"""The loader: ``PROVISIONING_BACKENDS[alias]`` → one backend object per alias and process.

Like Django's storage and e-mail handlers: a dotted path in settings, imported once and cached; an
``override_settings(PROVISIONING_BACKENDS=…)`` in a test clears the cache.

The providers used to live in ``instances.backends``. A deployment's settings (or its
``CONSOLE_PROVISIONING_BACKENDS``) may still name a class there; ``backend_class`` maps the old
dotted paths to the new ones and logs a deprecation warning, so such a console keeps working.
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from providers.base import ProvisioningBackend

logger = logging.getLogger(__name__)

# Old dotted path (instances.backends, before the providers had a package of their own) → new one.
DEPRECATED_PATHS = {
    "instances.backends.fake.FakeBackend": "providers.simulated.backend.SimulatedBackend",
    "instances.backends.local.LocalBackend": "providers.local.backend.LocalBackend",
    "instances.backends.slurm.SlurmBackend": "providers.slurm.backend.SlurmBackend",
    "instances.backends.kubernetes.KubernetesBackend": "providers.kubernetes.backend.KubernetesBackend",
    "instances.backends.kubernetes.backend.KubernetesBackend": "providers.kubernetes.backend.KubernetesBackend",
}

_cache: dict[str, ProvisioningBackend] = {}
_lock = threading.Lock()
_warned: set[str] = set()  # old paths already reported by this process: once each, not per page


def backend_path(path: str) -> str:
    """``path`` as it is named now: an old ``instances.backends…`` path becomes its ``providers…`` one
    (with a warning in the log that says what to write instead); any other path is returned as is."""
    new = DEPRECATED_PATHS.get(path)
    if new is None:
        return path
    if path not in _warned:
        _warned.add(path)
        logger.warning(
            "PROVISIONING_BACKENDS names %s, which has moved: write %s instead (the old path will stop working).",
            path,
            new,
        )
    return new


def backend_class(path: str) -> type[ProvisioningBackend]:
    """The backend class a dotted path names, old paths included. Raises ImportError as ``import_string``."""
    return import_string(backend_path(path))


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
            cls = backend_class(config["BACKEND"])
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
