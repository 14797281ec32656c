"""What the SSH gateway answers for the instances app: its key in every machine, its files panel.

Every create, start and restart adds the gateway's key for the instance to its authorized keys
(``instances.hooks.authorized_keys``); the instance page links to its file browser
(``instances.hooks.detail_panels``). ``GatewayConfig.ready()`` calls ``wire``.
"""

from __future__ import annotations

from gateway.keys import instance_authorized_keys
from instances import hooks as instance_hooks


def files_panel(*, instance) -> list[str]:
    """The instance page's link to its files (the page is ``gateway.views.instance_files``)."""
    return ["gateway/_files_panel.html"]


def wire() -> None:
    """Register the gateway's answers to the hooks of the apps below it."""
    instance_hooks.authorized_keys.implement(instance_authorized_keys)
    instance_hooks.detail_panels.implement(files_panel)
