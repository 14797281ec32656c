"""What the ports services refuse, with the message shown on the page and in the API."""

from __future__ import annotations


class PortRefused(Exception):
    """A request the rules refuse; ``field`` names the form field at fault, when one is."""

    def __init__(self, message: str, *, field: str = "", code: str = "invalid") -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.code = code
