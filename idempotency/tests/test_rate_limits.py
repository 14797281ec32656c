"""Throttled requests answer 429 in the error format, with Retry-After saying when to come back."""

import pytest


@pytest.fixture
def two_a_minute(settings):
    settings.API_RATE_PER_MIN = 2  # read per request (accounts.throttles)


def test_over_the_rate_is_a_429_with_retry_after(alice_client, two_a_minute):
    answers = [alice_client.get("/api/v1/billing/balance/") for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert 0 < int(answers[2].headers["Retry-After"]) <= 60
    assert answers[2].json()["error"]["code"] == "throttled"
