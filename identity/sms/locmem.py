"""A sender for tests: texts land in ``outbox`` (a list in memory), as Django's locmem mail backend does."""

from __future__ import annotations

import uuid

from identity.sms.base import SentText, SmsSender

outbox: list[dict] = []


class LocmemSender(SmsSender):
    def send_code(self, *, number: str, code: str, purpose: str, ttl_minutes: int) -> SentText:
        reference = uuid.uuid4().hex
        outbox.append({"number": number, "code": code, "purpose": purpose, "reference": reference})
        return SentText(reference=reference)
