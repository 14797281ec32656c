"""An offline provider for development, demos and tests: deterministic, and it says no on purpose.

It cannot know whom a number belongs to, so it accepts every checksum-valid number with a name of two
or more characters, except the ones it is told to refuse: a name containing "不符" (the records do not
match: "mismatch") and numbers whose sequence code (digits 15-17) is ``000`` (never issued: "unknown").
``UNAVAILABLE`` (an option) makes it answer as a provider that is down.
"""

from __future__ import annotations

import hashlib

from identity.realname.base import RealNameProvider, RealNameProviderUnavailable, RealNameVerdict


class TestRealNameProvider(RealNameProvider):
    __test__ = False  # not a pytest class
    name = "test"

    def verify(self, *, name: str, id_number: str) -> RealNameVerdict:
        if self.options.get("UNAVAILABLE"):
            raise RealNameProviderUnavailable("the test provider is set to be down")
        reference = "test-" + hashlib.sha256(f"{name}|{id_number}".encode()).hexdigest()[:16]
        if len(name) < 2 or "不符" in name:
            return RealNameVerdict(matched=False, reference=reference, reason="mismatch")
        if id_number[14:17] == "000":
            return RealNameVerdict(matched=False, reference=reference, reason="unknown")
        return RealNameVerdict(matched=True, reference=reference)
