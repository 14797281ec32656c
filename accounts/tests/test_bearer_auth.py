from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import APIToken
from accounts.services import api_token_create, api_token_revoke

URL = "/api/v1/account/profile/"


def get_with(raw: str, scheme: str = "Bearer"):
    return Client().get(URL, HTTP_AUTHORIZATION=f"{scheme} {raw}")


def assert_unauthorized(response):
    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'
    error = response.json()["error"]
    assert error["code"] == "authentication_failed"
    assert error["message"]


def test_a_valid_token_acts_as_its_owner(alice):
    _token, raw = api_token_create(user=alice, name="CI", expires_at=None)
    response = get_with(raw)
    assert response.status_code == 200
    assert response.json()["email"] == "alice@example.com"


def test_the_token_scheme_name_is_also_accepted(alice):
    _token, raw = api_token_create(user=alice, name="CI", expires_at=None)
    assert get_with(raw, scheme="Token").status_code == 200


def test_a_revoked_token_is_refused(alice):
    token, raw = api_token_create(user=alice, name="CI", expires_at=None)
    api_token_revoke(token=token)
    assert_unauthorized(get_with(raw))


def test_an_expired_token_is_refused(alice):
    token, raw = api_token_create(user=alice, name="CI", expires_at=timezone.now() + timedelta(days=7))
    APIToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert_unauthorized(get_with(raw))


@pytest.mark.parametrize("raw", ["garbage", "gpuc_not-a-real-token", "a b"])
def test_a_garbage_token_is_refused(db, raw):
    assert_unauthorized(get_with(raw))


def test_no_credentials_at_all_is_refused_in_the_same_format(db):
    response = Client().get(URL)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


def test_a_deactivated_users_token_is_refused(alice):
    _token, raw = api_token_create(user=alice, name="CI", expires_at=None)
    alice.is_active = False
    alice.save()
    assert_unauthorized(get_with(raw))


def test_using_a_token_records_when_it_was_last_used(alice):
    token, raw = api_token_create(user=alice, name="CI", expires_at=None)
    assert token.last_used_at is None
    before = timezone.now()
    get_with(raw)
    token.refresh_from_db()
    assert token.last_used_at >= before


def test_last_used_is_written_at_most_once_a_minute(alice):
    token, raw = api_token_create(user=alice, name="CI", expires_at=None)
    get_with(raw)
    token.refresh_from_db()
    first = token.last_used_at
    get_with(raw)
    token.refresh_from_db()
    assert token.last_used_at == first

    APIToken.objects.filter(pk=token.pk).update(last_used_at=first - timedelta(minutes=2))
    get_with(raw)
    token.refresh_from_db()
    assert token.last_used_at > first


def test_the_tokens_page_shows_the_last_use(alice, alice_client):
    _token, raw = api_token_create(user=alice, name="CI", expires_at=None)
    get_with(raw)
    body = alice_client.get("/account/api-tokens/").content.decode()
    assert "Never used" not in body
    assert "ago" in body
