"""The SMS sender contract: one method, and errors that say whether to blame the number or the service.

A sender is chosen as Django chooses an e-mail backend: ``IDENTITY_SMS_SENDER = {"BACKEND": dotted
path, "OPTIONS": {...}}``; ``identity.sms.sender_get()`` builds it once. Senders shipped:
``dev.DevTextsSender`` (the development texts inbox), ``locmem.LocmemSender`` (tests),
``aliyun.AliyunSender`` and ``tencent.TencentSender`` (the official SDKs).
"""

from __future__ import annotations

from dataclasses import dataclass


class SmsError(Exception):
    """The text was not sent. ``transient``: the service is down or throttling us, try later (503)."""

    transient = True


class SmsThrottled(SmsError):
    """The provider refuses more texts for now (to this number, or for our account)."""


class SmsBadNumber(SmsError):
    """The provider says the number cannot receive texts: the person should check it (a form error)."""

    transient = False


@dataclass(frozen=True)
class SentText:
    """What the provider answered for a text it accepted: its id, for support and delivery receipts."""

    reference: str


class SmsSender:
    """Sends a verification code to one mainland number (E.164, ``+86…``) with the provider's template.

    ``purpose`` is the code's (``signup``, ``login``, ``add``), for senders whose templates differ by
    use; ``code`` is the digits only. Returns ``SentText`` or raises ``SmsError``; never retries by
    itself (the person asks again, and the rate limits count each try).
    """

    label = "SMS"

    def __init__(self, **options) -> None:
        self.options = options

    def send_code(self, *, number: str, code: str, purpose: str, ttl_minutes: int) -> SentText:
        raise NotImplementedError
