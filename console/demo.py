"""The console's demo parts: the simulated cloud and the simulated payment gateway.

They let a console run with no provider and no merchant account, which is what development, the
tests and a demo want, and what a production console must never do by accident: its users would
launch machines that do not exist and top up with money nobody takes. A provisioning backend or a
payment gateway says it is one with the class attribute ``simulated = True``.

``console.checks`` fails ``manage.py check --deploy`` while one is enabled, unless
``CONSOLE_DEMO_MODE`` says the console is a demo; and whenever one is enabled, every page carries a
banner naming it (``templates/console/_demo_banner.html``, through the ``console`` context processor).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.utils.module_loading import import_string

from billing.gateways import gateway_paths
from providers import backend_class  # the backends' loader: it knows their old paths too


@dataclass(frozen=True)
class DemoParts:
    """What of this console is simulated. False when nothing is."""

    cloud: tuple[str, ...] = ()  # the PROVISIONING_BACKENDS aliases whose backend is simulated
    payments: str = ""  # the simulated gateway's dotted path when it is enabled (default or extra)

    def __bool__(self) -> bool:
        return bool(self.cloud or self.payments)


def _is_simulated(path: str, *, load=import_string) -> bool:
    # Only the class is imported, nothing is instantiated. A path that does not import is not a demo
    # part: the backend loader and the gateway loader report it where it is used.
    try:
        return bool(getattr(load(path), "simulated", False))
    except ImportError:
        return False


def demo_parts_enabled() -> DemoParts:
    """The simulated parts the settings enable: a configured backend alias counts, used by a region or not."""
    cloud = tuple(
        alias
        for alias, config in settings.PROVISIONING_BACKENDS.items()
        if config and _is_simulated(config.get("BACKEND", ""), load=backend_class)
    )
    simulated = [path for path in gateway_paths() if _is_simulated(path)]
    return DemoParts(cloud=cloud, payments=simulated[0] if simulated else "")
