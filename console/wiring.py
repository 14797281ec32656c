"""The console wires its own proxy's questions (``console.hooks``) to the apps that know the answers.

The console is the top layer: it may import every app, so it names the resolvers here, once, instead
of in settings. Tests swap them with ``proxy_target.override(…)``.
"""

from __future__ import annotations

from apps_marketplace.proxy_targets import deployment_proxy_target
from console import hooks as console_hooks
from ports.proxy_targets import port_proxy_target


def wire() -> None:
    """Deployments' resolver (instances' own servers, and a deployment's API key) and ports'."""
    console_hooks.proxy_target.implement(deployment_proxy_target)
    console_hooks.port_target.implement(port_proxy_target)
