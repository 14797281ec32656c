"""What pages show of a resource that moves through statuses (an instance, a volume).

A model mixing this in has ``status``, ``status_reason`` (a stored message, ``core.messages``), a
``BADGE_COLOURS`` mapping from status to badge colour and a ``BUSY`` set of statuses an operation is
still working through.
"""

from __future__ import annotations

from core.messages import shown


class StatusDisplayMixin:
    @property
    def key(self) -> str:
        """The provider-side name: the primary key, stable across retries."""
        return str(self.id)

    @property
    def status_reason_text(self) -> str:
        """Why it is in its status, in the reader's language."""
        return shown(self.status_reason)

    @property
    def badge_colour(self) -> str:
        return self.BADGE_COLOURS.get(self.status, "")

    @property
    def is_busy(self) -> bool:
        return self.status in self.BUSY


class EventReasonMixin:
    """For timeline rows with a ``reason`` stored as a message."""

    @property
    def reason_text(self) -> str:
        """The entry's reason, in the reader's language."""
        return shown(self.reason)
