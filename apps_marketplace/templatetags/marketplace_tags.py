"""Display helpers for the marketplace: parameter counts and memory sizes."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def params(count: int | None) -> str:
    """``8030000000`` → ``8.03B``; ``494000000`` → ``494M``."""
    if not count:
        return "—"
    if count >= 1_000_000_000:
        return f"{count / 1e9:.3g}B"
    if count >= 1_000_000:
        return f"{count / 1e6:.3g}M"
    return f"{count:,}"


@register.filter
def gib(value: int | None) -> str:
    """Bytes as GiB with one decimal, the unit GPU memory is sold in."""
    if value is None:
        return "—"
    return f"{value / 1024**3:.1f} GiB"
