"""What teams asks of the apps above it: each question a hook (``core.hooks``), declared here.

Teams sits below instances and the resource apps and imports none of them; its members table and the
end of a membership ask these hooks, answered from those apps' ``wiring`` modules (``manage.py hooks``).
"""

from __future__ import annotations

from collections.abc import Iterable

from core.hooks import hook


@hook(about="each member's spend this month and cards held, beside their limits on the team page")
def member_usage(*, account_id: int, user_ids: Iterable[int]) -> dict[int, dict]:
    """Per member of the team whose account is ``account_id``, ``{"spent_fen": …, "cards": …}``: this
    month's spend of the instances they launched, and the cards those hold now (the members table,
    beside each member's limits). Without an answer the table shows the limits alone."""
    return {}


@hook(many=True, about="a member left or was removed: end what they hold on the team's behalf (their share links)")
def membership_end(*, account, user) -> None:
    """``user`` is no longer in the team whose account is ``account`` (left, or was removed): end what
    they hold on its behalf (the share links they made), in the same transaction."""
