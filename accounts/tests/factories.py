"""Factories for people. ``UserFactory`` makes a user whose e-mail is verified, as after sign-up."""

from __future__ import annotations

import factory
from allauth.account.models import EmailAddress

from accounts.models import User

DEFAULT_PASSWORD = "correct horse battery staple"


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
