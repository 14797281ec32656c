"""The real-name provider contract: does this name belong to this ID number?

Chosen like the SMS sender: ``IDENTITY_REAL_NAME_PROVIDER = {"BACKEND": …, "OPTIONS": {…}}``. Shipped:
``test.TestRealNameProvider`` (offline, deterministic) and ``tencent.TencentIdCardProvider``
(Tencent Cloud's 身份证二要素核验, ``IdCardVerification``). The number passed is already
checksum-valid (``identity.normalise.id_number_normalise``); nothing of it is kept by the console.
"""

from __future__ import annotations

from dataclasses import dataclass


class RealNameProviderUnavailable(Exception):
    """The provider could not give a verdict now (down, busy, over its daily limit): try again later."""


@dataclass(frozen=True)
class RealNameVerdict:
    """``matched``: the authority's records pair the name and the number. ``reference``: the provider's
    request id, kept for disputes. ``reason``: why not, in words the person can act on (not translated
    here: the service picks one of its own messages)."""

    matched: bool
    reference: str
    reason: str = ""  # "mismatch", "invalid" or "unknown"


class RealNameProvider:
    name = "base"

    def __init__(self, **options) -> None:
        self.options = options

    def verify(self, *, name: str, id_number: str) -> RealNameVerdict:
        raise NotImplementedError
