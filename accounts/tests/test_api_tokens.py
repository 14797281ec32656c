import hashlib
from datetime import timedelta

from django.test import Client
from django.utils import timezone

from accounts.models import APIToken
from accounts.services import api_token_create

URL = "/api/v1/account/tokens/"


def test_creating_a_token_returns_the_raw_token_once(alice, alice_client):
    response = alice_client.post(URL, {"name": "CI", "expires_in_days": 30}, content_type="application/json")
    assert response.status_code == 201
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    token = APIToken.objects.get(user=alice)
    assert hashlib.sha256(body["token"].encode()).hexdigest() == token.digest
    assert body["status"] == "active"
    assert abs(token.expires_at - (timezone.now() + timedelta(days=30))) < timedelta(minutes=1)

    listed = alice_client.get(URL).json()["results"]
    assert "token" not in listed[0]
    assert "token" not in alice_client.get(f"{URL}{token.pk}/").json()
    # The new token works as a Bearer credential.
    assert Client().get(URL, HTTP_AUTHORIZATION=f"Bearer {body['token']}").status_code == 200


def test_a_token_without_expiry_never_expires(alice, alice_client):
    response = alice_client.post(URL, {"name": "forever", "expires_in_days": None}, content_type="application/json")
    assert response.status_code == 201
    assert response.json()["expires_at"] is None


def test_delete_revokes_and_keeps_the_token_in_the_list(alice, alice_client):
    token, raw = api_token_create(user=alice, name="CI", expires_at=None)
    assert alice_client.delete(f"{URL}{token.pk}/").status_code == 204
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert alice_client.get(f"{URL}{token.pk}/").json()["status"] == "revoked"
    assert Client().get(URL, HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 401


def test_an_out_of_range_expiry_is_a_field_error(alice_client):
    response = alice_client.post(URL, {"name": "CI", "expires_in_days": 0}, content_type="application/json")
    assert response.status_code == 400
    assert "expires_in_days" in response.json()["error"]["fields"]
