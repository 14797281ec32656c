"""Template helpers shared by every page: money, durations, navigation state."""

from __future__ import annotations

from django import template
from django.urls import reverse
from django.utils.translation import gettext as _

register = template.Library()


@register.filter
def cny(fen: int | None) -> str:
    """Format an integer amount of fen as yuan: ``123456`` → ``¥1,234.56``. Never goes through float."""
    if fen is None:
        return "—"
    sign = "-" if fen < 0 else ""
    yuan, cents = divmod(abs(int(fen)), 100)
    return f"{sign}¥{yuan:,}.{cents:02d}"


@register.filter
def duration(seconds: int | float | None) -> str:
    """A human duration: ``11520`` → ``3 h 12 min``."""
    if seconds is None:
        return "—"
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return _("%(d)d d %(h)d h") % {"d": days, "h": hours}
    if hours:
        return _("%(h)d h %(m)d min") % {"h": hours, "m": minutes}
    if minutes:
        return _("%(m)d min") % {"m": minutes}
    return _("%(s)d s") % {"s": seconds}


@register.simple_tag(takes_context=True)
def nav_active(context, prefix: str) -> str:
    request = context.get("request")
    if request is not None and request.path.startswith(prefix):
        return "active"
    return ""


@register.simple_tag
def dev_mailbox_url() -> str:
    """The development mailbox's address while mail goes to it, else "" (pages that say "check your
    inbox" link it then)."""
    from console.mail import mailbox_active

    return reverse("dev_mailbox") if mailbox_active() else ""
