"""What notifications asks of the apps above it: a hook (``core.hooks``), declared here.

Notifications knows users by attribute only (it imports no app); who hears about an account is a
question for teams, which answers from ``teams/wiring.py`` (``manage.py hooks`` lists who).
"""

from __future__ import annotations

from core.hooks import hook


@hook(about="who hears about an account: a team's owners and admins, and the member whose machine the news is about")
def recipients(*, user, kind: str, actor=None) -> list:
    """The people told about ``user``'s account for news of ``kind``: a team's account to its owners and
    admins (billing viewers too for news about money), and ``actor`` (the person who launched the thing
    the news is about) while they may still see it. Without an answer, the user itself."""
    return [user]
