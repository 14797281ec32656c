"""Money and durations as people read them, for pages, e-mails and messages alike.

The template filters of ``console_tags`` are these functions; code that writes an e-mail or a
message calls them here rather than importing a template library.
"""

from __future__ import annotations

from django.utils.translation import gettext as _


def cny(fen: int | None) -> str:
    """Format an integer amount of fen as yuan: ``123456`` → ``¥1,234.56``. Never goes through float."""
    if fen is None:
        return "—"
    sign = "-" if fen < 0 else ""
    yuan, cents = divmod(abs(int(fen)), 100)
    return f"{sign}¥{yuan:,}.{cents:02d}"


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
