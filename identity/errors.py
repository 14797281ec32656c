"""Identity's refusals: what a person can act on, with a machine-readable ``code``.

Billing and instances let ``RealNameRequired`` and ``TrialRefused`` through to their own views, which
show the message (a form error, or a 4xx body in the API).
"""

from __future__ import annotations

from core.errors import Refusal


class IdentityError(Refusal):
    code = "invalid"


class CodeRefused(IdentityError):
    """The code is wrong, expired, used, or tried too often: one message for all, so none is an oracle."""

    code = "code_invalid"


class TooManyCodes(IdentityError):
    """A limit on texts (per number, address or device) is reached: ``retry_after`` seconds until one frees."""

    code = "rate_limited"

    def __init__(self, message: str, *, retry_after: int, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.retry_after = retry_after


class PhoneTaken(IdentityError):
    code = "phone_taken"


class SmsUnavailable(IdentityError):
    """The SMS provider did not take the text (down, or refusing us): a 503 with Retry-After."""

    code = "sms_unavailable"
    retry_after = 60


class RealNameRejected(IdentityError):
    code = "real_name_rejected"


class RealNameUnavailable(IdentityError):
    """The verification provider could not answer: try again later (503)."""

    code = "real_name_unavailable"
    retry_after = 60


class RealNameRequired(IdentityError):
    """This console requires a verified real name before paid use (``IDENTITY_REAL_NAME_REQUIRED``)."""

    code = "real_name_required"


class TrialRefused(IdentityError):
    """The person is not verified as the setting requires, or their number or identity had a trial already."""

    code = "trial_unavailable"
