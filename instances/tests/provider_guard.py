"""The simulated cloud behind a guard: it counts every call of the provider contract and, while armed,
refuses them. The seam that proves pages and the API read what the worker saved and ask no provider.

It offers JupyterLab, VS Code, an app, a WebUI and SSH, unlike the plain simulated cloud, so a page
that shows them shows what was saved, not an empty default.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from providers import EntryPoints, ProvisioningBackend
from providers.simulated.backend import SimulatedBackend

# Every method of the contract (create, poll, entry_points, proxy_target, the volumes' …). Data such as
# ``max_nodes`` or ``supports_volumes`` is configuration, read from settings, not asked of a provider.
# ``has_image`` is configuration too: by contract a provider answers it from its options, without
# connecting (the launch form asks it, so that an image a region lacks is refused before anything exists).
CONTRACT = frozenset(
    name for name, value in vars(ProvisioningBackend).items() if callable(value) and not name.startswith("_")
) - {"has_image"}
SSH_PORT = 2222


class ProviderCalled(AssertionError):
    """A provider was asked while the guard was armed."""


class GuardedBackend(SimulatedBackend):
    # Class-wide: ``get_backend`` builds one per alias, and a test arms them all at once.
    calls: list[str] = []
    armed = False

    def __getattribute__(self, name: str):
        if name in CONTRACT:
            GuardedBackend.calls.append(name)
            if GuardedBackend.armed:
                raise ProviderCalled(f"the provider was asked {name}() during a read")
        return super().__getattribute__(name)

    def entry_points(self, *, key: str, state: dict) -> EntryPoints:
        return EntryPoints(web=("lab", "code", "app", "webui"), ssh_port=SSH_PORT, ssh_user="console")


@contextlib.contextmanager
def provider_forbidden() -> Iterator[list[str]]:
    """``with provider_forbidden() as calls:`` every contract call in the block raises and is listed in
    ``calls`` (listed even where the caller swallows the error)."""
    GuardedBackend.calls.clear()
    GuardedBackend.armed = True
    try:
        yield GuardedBackend.calls
    finally:
        GuardedBackend.armed = False


def guarded_backends(fleet: list[dict]) -> dict:
    """A PROVISIONING_BACKENDS value: the guarded simulated cloud with ``fleet``, booting at once."""
    return {
        "default": {
            "BACKEND": "instances.tests.provider_guard.GuardedBackend",
            "OPTIONS": {"FLEET": fleet, "BOOT_DELAY_S": 0},
        }
    }
