"""What instances answers for the apps below it: billing's and teams' hooks (``core.hooks``).

Billing stops a user's machines through here when the money runs out, and draws a statement per member
and per instance; teams shows each member's spend against their limits. ``InstancesConfig.ready()``
calls ``wire``.
"""

from __future__ import annotations

from billing import hooks as billing_hooks
from instances.attribution import usage_attribution
from instances.members import member_usage
from instances.services import instances_stop_for_funds
from teams import hooks as teams_hooks


def wire() -> None:
    """Register instances' answers to the hooks of the apps below it."""
    billing_hooks.out_of_funds.implement(instances_stop_for_funds)
    billing_hooks.usage_attribution.implement(usage_attribution)
    teams_hooks.member_usage.implement(member_usage)
