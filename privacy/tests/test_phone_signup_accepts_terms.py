"""Signing up by mobile number accepts the terms as the e-mail form does: the box is required on the
log-in page's code step, and a new account's acceptance of the texts in force is recorded."""

from __future__ import annotations

from django.test import Client

from identity.models import PhoneNumber
from identity.sms import locmem
from privacy.models import Acceptance

URL = "/accounts/phone/"


def _phone_login(settings) -> None:
    settings.IDENTITY_SMS_SENDER = {"BACKEND": "identity.sms.locmem.LocmemSender", "OPTIONS": {}}
    settings.IDENTITY_PHONE_LOGIN = True
    locmem.outbox.clear()


def test_the_code_step_needs_the_box_and_a_new_account_accepts_the_texts(db, settings):
    _phone_login(settings)
    client = Client()
    client.post(URL, {"number": "13800138000"})
    code = locmem.outbox[0]["code"]
    refused = client.post(URL, {"number": "+8613800138000", "code": code})
    assert refused.status_code == 400
    assert "Accept the terms of service and the privacy policy to continue." in refused.content.decode()
    assert not PhoneNumber.objects.exists()
    done = client.post(URL, {"number": "+8613800138000", "code": code, "accept_terms": "on"})
    assert done.status_code == 302
    user = PhoneNumber.objects.get().user
    assert set(Acceptance.objects.filter(user=user).values_list("document__kind", flat=True)) == {"terms", "privacy"}
