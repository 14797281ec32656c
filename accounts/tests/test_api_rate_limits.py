"""The API's limits per credential: the account's, shared by all its sessions and tokens, and a token's
own within it. Over either, a 429 in the error format with ``Retry-After``; staff set an account's."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from accounts.services import api_token_create

URL = "/api/v1/billing/balance/"
STATUS = "/api/v1/account/rate-limit/"


@pytest.fixture
def three_a_minute(settings):
    settings.API_RATE_PER_MIN = 3


def _bearer(raw: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def _token(user, name: str = "script", rate_per_min: int | None = None) -> Client:
    return _bearer(api_token_create(user=user, name=name, expires_at=None, rate_per_min=rate_per_min)[1])


def _codes(client: Client, n: int) -> list[int]:
    return [client.get(URL).status_code for _ in range(n)]


def test_the_accounts_limit_is_shared_by_its_tokens_and_sessions(alice, alice_client, three_a_minute):
    first, second = _token(alice, "ci"), _token(alice, "notebook")
    assert _codes(first, 2) == [200, 200]
    assert _codes(second, 1) == [200]
    refused = alice_client.get(URL)
    assert refused.status_code == 429
    assert 0 < int(refused.headers["Retry-After"]) <= 60
    assert refused.json()["error"]["code"] == "throttled"


def test_one_account_over_its_limit_leaves_another_alone(alice, bob, three_a_minute):
    assert _codes(_token(alice), 4) == [200, 200, 200, 429]
    assert _codes(_token(bob), 3) == [200, 200, 200]


def test_staff_raise_an_accounts_limit(alice, three_a_minute):
    alice.api_rate_per_min = 5
    alice.save(update_fields=["api_rate_per_min"])
    assert _codes(_token(alice), 6) == [200] * 5 + [429]


def test_a_tokens_own_limit_stops_it_and_not_its_siblings(alice, settings):
    settings.API_RATE_PER_MIN = 10
    looping = _token(alice, "loop", rate_per_min=2)
    assert _codes(looping, 3) == [200, 200, 429]
    assert int(looping.get(URL).headers["Retry-After"]) > 0
    assert _codes(_token(alice, "other"), 2) == [200, 200]


def test_a_token_cannot_have_more_than_its_account(alice, alice_client, three_a_minute):
    made = alice_client.post(
        "/api/v1/account/tokens/", {"name": "greedy", "rate_per_min": 4}, content_type="application/json"
    )
    assert made.status_code == 201 and made.json()["rate_per_min"] == 3  # stored as the account's
    modest = alice_client.post(
        "/api/v1/account/tokens/", {"name": "modest", "rate_per_min": 2}, content_type="application/json"
    )
    assert modest.status_code == 201 and modest.json()["rate_per_min"] == 2
    zero = alice_client.post(
        "/api/v1/account/tokens/", {"name": "none", "rate_per_min": 0}, content_type="application/json"
    )
    assert zero.status_code == 400 and "rate_per_min" in zero.json()["error"]["fields"]


def test_the_page_makes_a_token_with_a_limit_and_refuses_one_above_the_accounts(alice, alice_client, settings):
    settings.API_RATE_PER_MIN = 50
    page = reverse("account_api_tokens")
    refused = alice_client.post(page, {"name": "too much", "expires": "30", "rate_per_min": "51"})
    assert refused.status_code == 400
    assert "rate_per_min" in refused.context["form"].errors
    assert "50 API requests a minute" in alice_client.get(page).content.decode()
    made = alice_client.post(page, {"name": "ci", "expires": "30", "rate_per_min": "20"})
    assert made.status_code == 201
    assert alice.api_tokens.get(name="ci").rate_per_min == 20
    assert "20/min" in made.content.decode()


def test_a_credential_reads_its_limits_and_what_is_left(alice, settings):
    settings.API_RATE_PER_MIN = 10
    client = _token(alice, "ci", rate_per_min=4)
    client.get(URL)
    body = client.get(STATUS).json()
    assert body == {
        "window_s": 60,
        "account_per_min": 10,
        "account_remaining": 8,
        "token_per_min": 4,
        "token_remaining": 2,
    }


def test_a_session_has_no_token_limit(alice_client, settings):
    settings.API_RATE_PER_MIN = 7
    body = alice_client.get(STATUS).json()
    assert body["account_per_min"] == 7 and body["account_remaining"] == 6
    assert body["token_per_min"] is None and body["token_remaining"] is None


def test_the_schema_and_every_operation_document_the_limits(alice_client, settings):
    schema = alice_client.get("/api/schema/?format=json").json()
    assert f"{settings.API_RATE_PER_MIN} requests a minute per account" in schema["info"]["description"]
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if method in {"get", "post", "put", "patch", "delete"}:
                assert "429" in operation["responses"], (method, path)
                assert "Retry-After" in operation["responses"]["429"]["headers"], (method, path)
