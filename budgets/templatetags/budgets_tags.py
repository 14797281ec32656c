"""``{% instance_cap instance as cap %}``: an instance's spending limit and spend, for its page's panel."""

from __future__ import annotations

from django import template

from budgets.selectors import instance_cap_for
from teams.access import Access, principal_access

register = template.Library()


@register.simple_tag(takes_context=True)
def instance_cap(context, instance) -> dict:
    """``can_set``: whether this person operates the instance (its creator, or a team admin), and so
    may change its limit; the others see it without the form."""
    cap, spent = instance_cap_for(instance=instance)
    request = context.get("request")
    can_set = request is not None and (
        principal_access(
            request,
            owner_id=instance.owner_id,
            created_by_id=instance.created_by_id,
        )
        == Access.OPERATE
    )
    return {"cap": cap, "spent_fen": spent, "reached": cap is not None and spent >= cap.limit_fen, "can_set": can_set}
