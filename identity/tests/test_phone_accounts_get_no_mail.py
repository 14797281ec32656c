"""An account made by mobile number has a placeholder address under .invalid: notices reach its inbox, no mail."""

from __future__ import annotations

import pytest
from django.core import mail

from accounts.tests.factories import UserFactory
from notifications.models import Kind, Notification
from notifications.services import Message, notify

pytestmark = pytest.mark.django_db


def test_a_phone_account_gets_its_notices_in_the_inbox_only(django_capture_on_commit_callbacks):
    user = UserFactory(email="phone-0123@phone.invalid", verified=False)
    with django_capture_on_commit_callbacks(execute=True):
        notify(user=user, kind=Kind.LOW_BALANCE, render=lambda: Message(title="Low balance", body="…"))
    assert Notification.objects.filter(user=user).count() == 1
    assert mail.outbox == []
