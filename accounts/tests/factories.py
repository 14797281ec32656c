"""Factories for people. ``UserFactory`` makes a user whose e-mail is verified, as after sign-up.

Staff must sign in with a second factor (accounts/two_factor.py), so a staff user comes with an
authenticator app whose secret is ``TOTP_SECRET`` (``totp_code()`` gives its code now), unless made with
``second_factor=False``; others get one with ``second_factor=True``.
"""

from __future__ import annotations

import factory
from allauth.account.models import EmailAddress
from allauth.mfa.totp.internal.auth import TOTP, format_hotp_value, hotp_value, yield_hotp_counters_from_time

from accounts.models import User

DEFAULT_PASSWORD = "correct horse battery staple"
TOTP_SECRET = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"  # the tests' authenticator app (base32)


def totp_code(secret: str = TOTP_SECRET, *, step: int = 0) -> str:
    """The code an authenticator app with ``secret`` shows now (``step`` periods later or earlier)."""
    counters = list(yield_hotp_counters_from_time())
    return format_hotp_value(hotp_value(secret, counters[len(counters) // 2] + step))


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        skip_postgeneration_save = True

    email = factory.Sequence(lambda n: f"user{n}@example.com")
    password = factory.PostGenerationMethodCall("set_password", DEFAULT_PASSWORD)

    @factory.post_generation
    def verified(self, create: bool, extracted: bool | None, **kwargs) -> None:
        if not create:
            return
        self.save()
        EmailAddress.objects.create(user=self, email=self.email, primary=True, verified=extracted is not False)

    @factory.post_generation
    def second_factor(self, create: bool, extracted: bool | None, **kwargs) -> None:
        if not create or not (extracted or (extracted is None and self.is_staff)):
            return
        TOTP.activate(self, TOTP_SECRET)
