"""Adding or changing the account's number from its settings, beside e-mail."""

from __future__ import annotations

import pytest
from django.utils import timezone

from identity.models import PhoneNumber

pytestmark = pytest.mark.django_db
URL = "/account/identity/phone/"


def test_alice_verifies_a_number_and_can_log_in_with_it(alice, alice_client, outbox):
    assert alice_client.post(URL, {"number": "13800138000"}).status_code == 200
    response = alice_client.post(URL, {"number": "+8613800138000", "code": outbox[0]["code"]})
    assert response.status_code == 302
    assert PhoneNumber.objects.get(user=alice).number == "+8613800138000"
    page = alice_client.get("/account/identity/").content.decode()
    assert "138****8000" in page and "13800138000" not in page


def test_another_accounts_number_is_refused(alice_client, charlie, outbox):
    PhoneNumber.objects.create(user=charlie, number="+8613800138000", verified_at=timezone.now())
    response = alice_client.post(URL, {"number": "13800138000"})
    assert response.status_code == 400 and "belongs to another account" in response.content.decode()
    assert outbox == []


def test_a_code_sent_to_charlie_does_not_verify_for_alice(alice, alice_client, charlie, client_for, outbox):
    client_for(charlie).post(URL, {"number": "13800138000"})
    response = alice_client.post(URL, {"number": "+8613800138000", "code": outbox[0]["code"]})
    assert response.status_code == 400
    assert not PhoneNumber.objects.exists()


def test_the_page_needs_a_log_in(client):
    assert client.get("/account/identity/").status_code == 302
