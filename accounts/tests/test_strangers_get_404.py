"""Charlie (a stranger) cannot see, change, delete or revoke alice's keys and tokens: every answer is 404."""

import pytest

from accounts.models import APIToken, SSHKey
from accounts.services import api_token_create, ssh_key_add
from accounts.tests import keys


@pytest.fixture
def alices_key(alice):
    return ssh_key_add(user=alice, name="laptop", public_key=keys.ed25519_public())


@pytest.fixture
def alices_token(alice):
    return api_token_create(user=alice, name="CI", expires_at=None)[0]


@pytest.mark.parametrize("method", ["get", "post"])
def test_charlie_cannot_delete_alices_key_on_the_page(charlie_client, alices_key, method):
    response = getattr(charlie_client, method)(f"/account/ssh-keys/{alices_key.pk}/delete/")
    assert response.status_code == 404
    assert SSHKey.objects.filter(pk=alices_key.pk).exists()


@pytest.mark.parametrize("method", ["get", "post"])
def test_charlie_cannot_revoke_alices_token_on_the_page(charlie_client, alices_token, method):
    response = getattr(charlie_client, method)(f"/account/api-tokens/{alices_token.pk}/revoke/")
    assert response.status_code == 404
    alices_token.refresh_from_db()
    assert alices_token.revoked_at is None


@pytest.mark.parametrize("method", ["get", "patch", "delete"])
def test_charlie_cannot_reach_alices_key_in_the_api(charlie_client, alices_key, method):
    response = getattr(charlie_client, method)(
        f"/api/v1/account/ssh-keys/{alices_key.pk}/", {"name": "mine now"}, content_type="application/json"
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    alices_key.refresh_from_db()
    assert alices_key.name == "laptop"


@pytest.mark.parametrize("method", ["get", "delete"])
def test_charlie_cannot_reach_alices_token_in_the_api(charlie_client, alices_token, method):
    response = getattr(charlie_client, method)(f"/api/v1/account/tokens/{alices_token.pk}/")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    alices_token.refresh_from_db()
    assert alices_token.revoked_at is None


def test_charlies_lists_do_not_show_alices_things(charlie_client, alices_key, alices_token):
    assert charlie_client.get("/api/v1/account/ssh-keys/").json()["count"] == 0
    assert charlie_client.get("/api/v1/account/tokens/").json()["count"] == 0
    assert alices_key.fingerprint not in charlie_client.get("/account/ssh-keys/").content.decode()
    assert alices_token.prefix not in charlie_client.get("/account/api-tokens/").content.decode()
    assert APIToken.objects.count() == 1
