import hashlib
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from accounts.authentication import TOKEN_PREFIX
from accounts.models import APIToken
from accounts.services import api_token_create

URL = "/account/api-tokens/"


def test_the_raw_token_is_shown_once_right_after_creation(alice, alice_client):
    response = alice_client.post(URL, {"name": "CI", "expires": "30"})
    assert response.status_code == 201
    assert "no-store" in response["Cache-Control"]
    body = response.content.decode()
    token = APIToken.objects.get(user=alice)
    start = body.index('id="raw-token">') + len('id="raw-token">')
    raw = body[start : body.index("</code>", start)]
    assert raw.startswith(TOKEN_PREFIX) and len(raw) > 40
    assert 'data-copy="#raw-token"' in body
    assert "shown only once" in body
    assert hashlib.sha256(raw.encode()).hexdigest() == token.digest

    again = alice_client.get(URL).content.decode()
    assert raw not in again
    assert token.prefix in again


def test_only_the_digest_is_stored(alice):
    token, raw = api_token_create(user=alice, name="CI", expires_at=None)
    token.refresh_from_db()
    stored = [str(getattr(token, field.attname)) for field in APIToken._meta.concrete_fields]
    assert all(raw not in value for value in stored)
    assert token.digest == hashlib.sha256(raw.encode()).hexdigest()
    assert raw.startswith(token.prefix)


def test_each_token_is_different(alice):
    raws = {api_token_create(user=alice, name="t", expires_at=None)[1] for _ in range(5)}
    assert len(raws) == 5


@pytest.mark.parametrize(("choice", "days"), [("7", 7), ("30", 30), ("90", 90), ("never", None)])
def test_the_expiry_choices(alice, alice_client, choice, days):
    alice_client.post(URL, {"name": "CI", "expires": choice})
    token = APIToken.objects.get(user=alice)
    if days is None:
        assert token.expires_at is None
    else:
        assert abs(token.expires_at - (timezone.now() + timedelta(days=days))) < timedelta(minutes=1)


def test_a_token_needs_a_name(alice, alice_client):
    response = alice_client.post(URL, {"name": "  ", "expires": "30"})
    assert response.status_code == 400
    assert 'class="field has-error"' in response.content.decode()
    assert not APIToken.objects.exists()


def test_an_expiry_in_the_past_is_refused(alice):
    with pytest.raises(ValidationError) as caught:
        api_token_create(user=alice, name="CI", expires_at=timezone.now() - timedelta(seconds=1))
    assert "expires_at" in caught.value.error_dict


def test_the_list_shows_each_tokens_status(alice, alice_client):
    api_token_create(user=alice, name="live one", expires_at=None)
    expired, _raw = api_token_create(user=alice, name="old one", expires_at=timezone.now() + timedelta(days=1))
    APIToken.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(days=1))
    revoked, _raw = api_token_create(user=alice, name="gone one", expires_at=None)
    APIToken.objects.filter(pk=revoked.pk).update(revoked_at=timezone.now())
    body = alice_client.get(URL).content.decode()
    assert '<span class="badge green">Active</span>' in body
    assert '<span class="badge yellow">Expired</span>' in body
    assert '<span class="badge red">Revoked</span>' in body
    assert "Never used" in body


def test_the_list_page_does_a_fixed_number_of_queries(alice, alice_client, django_assert_max_num_queries):
    for n in range(5):
        api_token_create(user=alice, name=f"token {n}", expires_at=None)
    with django_assert_max_num_queries(7):  # the page's own, the header's bell and teams switcher: none per token
        response = alice_client.get(URL)
    assert response.content.decode().count('class="badge green"') == 5
