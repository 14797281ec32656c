"""``{% instance_cap instance as cap %}``: an instance's spending limit and spend, for its page's panel."""

from __future__ import annotations

from django import template

from budgets.selectors import instance_cap_for

register = template.Library()


@register.simple_tag
def instance_cap(instance) -> dict:
    cap, spent = instance_cap_for(instance=instance)
    return {"cap": cap, "spent_fen": spent, "reached": cap is not None and spent >= cap.limit_fen}
