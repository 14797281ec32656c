"""What budgets answers for the instances app: the spending guard, and the instance page's cap panel.

A hard-capped budget reached this month, or an instance's own limit, refuses launches and starts
(``instances.hooks.spend_guard``); the instance page offers "stop this one after ¥X"
(``instances.hooks.detail_panels``). ``BudgetsConfig.ready()`` calls ``wire``.
"""

from __future__ import annotations

from budgets.services import spend_guard
from instances import hooks as instance_hooks


def instance_cap_panel(*, instance) -> list[str]:
    """The instance page's panel of its own spending limit."""
    return ["budgets/_instance_cap.html"]


def wire() -> None:
    """Register budgets' answers to the hooks of the apps below it."""
    instance_hooks.spend_guard.implement(spend_guard)
    instance_hooks.detail_panels.implement(instance_cap_panel)
