"""What billing asks of the apps above it: each question a hook (``core.hooks``), declared here.

Billing sits below instances, metrics and teams and imports none of them; when money runs out, when a
statement is drawn and when a team's wallet is used it asks these hooks, and those apps answer from
their ``wiring`` modules (``manage.py hooks`` lists who).
"""

from __future__ import annotations

from datetime import datetime

from core.hooks import Hook, hook


@hook(required=True, about="stop what costs money once a balance has run out (unless the policy is `notify`)")
def out_of_funds(*, user_id: int) -> object:
    """Called once when ``user_id``'s balance has run out, ``BILLING_OUT_OF_FUNDS_GRACE_S`` after it did
    (unless ``BILLING_OUT_OF_FUNDS_POLICY`` is ``notify``): stop what costs money. instances stops the
    user's machines, keeping their disks, and closes the meters left open. An exception leaves the
    alert unclaimed, so the next run calls it again."""


@hook(about="a statement's lines of what was spent while GPUs sat idle")
def idle_waste(*, user, start: datetime, end: datetime) -> list:
    """The statement's lines of what was spent in ``[start, end)`` while GPUs sat idle, per instance,
    each with ``name``, ``ref``, ``idle_seconds`` and ``amount_fen`` (metrics measures GPU use). None
    without an answer."""
    return []


@hook(many=True, about="what each usage line measured and who launched it: a statement per member and per instance")
def usage_attribution(*, user, refs: list[str]) -> dict[str, dict]:
    """``{ref: {"resource_key", "resource_label", "member_id", "member_label"}}`` for the meter refs the
    answering app opened: what each usage line measured and who launched it (one query each). Billing
    knows meters by their ``ref`` only."""
    return {}


class TeamWallets:
    """What a membership may do with its team's wallet. Without teams no membership allows anything and
    no account is a team's."""

    def allows(self, *, membership, action: str) -> bool:
        """Whether ``membership`` may do ``action`` (``billing.access.VIEW`` or ``PAY``) with its team's wallet."""
        return False

    def is_team_account(self, *, user) -> bool:
        """Whether ``user`` is a team's account (no trial credit, no person to e-mail)."""
        return False


team_wallets: Hook[TeamWallets] = Hook(
    TeamWallets,
    name="billing.hooks.team_wallets",
    about="what a membership may do with its team's wallet (`view`, `pay`), and which accounts are teams' (no trial credit)",
)
"""Teams answers what its roles may do with the team's wallet (``billing/access.py`` asks)."""
