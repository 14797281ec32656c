"""What ports answers for the apps below it: ports declared at launch, share links ended with a membership.

A launch asking for ports declares them in its transaction (``instances.hooks.ports_at_launch``); a
member who leaves a team loses the share links they made (``teams.hooks.membership_end``).
``PortsConfig.ready()`` calls ``wire``.
"""

from __future__ import annotations

from instances import hooks as instance_hooks
from ports.services import ports_declare_at_launch, shares_revoke_for_member
from teams import hooks as teams_hooks


def wire() -> None:
    """Register ports' answers to the hooks of the apps below it."""
    instance_hooks.ports_at_launch.implement(ports_declare_at_launch)
    teams_hooks.membership_end.implement(shares_revoke_for_member)
