"""The base of the refusals services raise: what a user can act on, said once for every app.

``code`` is machine-readable (the API's error code), the message is for people and already
translated, and ``field`` names the form field it is about, when there is one. Each app subclasses it
(``instances.errors.InstanceError``, ``teams.errors.TeamError``) so its views catch its own family.
"""

from __future__ import annotations


class Refusal(Exception):
    code = "invalid"
    field: str | None = None

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if field is not None:
            self.field = field
