from django.test import Client
from django.utils import timezone

from accounts.models import APIToken
from accounts.services import api_token_create, api_token_revoke


def test_revoke_asks_for_confirmation_first(alice, alice_client):
    token, _raw = api_token_create(user=alice, name="CI", expires_at=None)
    response = alice_client.get(f"/account/api-tokens/{token.pk}/revoke/")
    assert response.status_code == 200
    assert "Revoke the token “CI”?" in response.content.decode()
    token.refresh_from_db()
    assert token.revoked_at is None


def test_posting_the_confirmation_revokes_the_token(alice, alice_client):
    token, raw = api_token_create(user=alice, name="CI", expires_at=None)
    response = alice_client.post(f"/account/api-tokens/{token.pk}/revoke/", follow=True)
    assert "Token “CI” revoked" in response.content.decode()
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert token.status() == APIToken.Status.REVOKED
    assert Client().get("/api/v1/account/profile/", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 401


def test_revoking_twice_keeps_the_first_time(alice):
    token, _raw = api_token_create(user=alice, name="CI", expires_at=None)
    assert api_token_revoke(token=token) is True
    first = token.revoked_at
    assert api_token_revoke(token=token) is False
    token.refresh_from_db()
    assert token.revoked_at == first <= timezone.now()
