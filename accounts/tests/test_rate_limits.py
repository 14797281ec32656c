"""Abuse limits (settings.ACCOUNT_RATE_LIMITS) answer 429 with a page that says what happened."""

from django.core import mail
from django.test import Client

from accounts.tests.factories import DEFAULT_PASSWORD


def assert_too_many(response):
    assert response.status_code == 429
    body = response.content.decode()
    assert "Too many attempts" in body
    assert "Wait a few minutes, then try again." in body
    assert 'class="card auth-card too-many-requests"' in body


def test_the_sixth_failed_login_for_an_address_gets_the_429_page(alice):
    client = Client()
    for _ in range(5):
        response = client.post("/accounts/login/", {"login": "alice@example.com", "password": "wrong guess 123"})
        assert response.status_code == 200
        assert "The email address and/or password you specified are not correct." in response.content.decode()
    assert_too_many(client.post("/accounts/login/", {"login": "alice@example.com", "password": "wrong guess 123"}))
    # Locked out even with the right password, so guessing gains nothing.
    assert_too_many(client.post("/accounts/login/", {"login": "alice@example.com", "password": DEFAULT_PASSWORD}))


def test_the_lockout_is_per_address(alice, charlie):
    client = Client()
    for _ in range(6):
        client.post("/accounts/login/", {"login": "alice@example.com", "password": "wrong guess 123"})
    response = client.post("/accounts/login/", {"login": "charlie@example.com", "password": DEFAULT_PASSWORD})
    assert response.status_code == 302


def test_too_many_signups_from_one_address_get_the_429_page(db):
    client = Client()
    for n in range(10):
        response = client.post(
            "/accounts/signup/",
            {
                "email": f"new{n}@example.com",
                "password1": "a long passphrase 42",
                "password2": "a long passphrase 42",
                "accept_terms": "on",
            },
        )
        assert response.status_code == 302, n
    assert_too_many(
        client.post(
            "/accounts/signup/",
            {
                "email": "new10@example.com",
                "password1": "a long passphrase 42",
                "password2": "a long passphrase 42",
                "accept_terms": "on",
            },
        )
    )


def test_too_many_reset_requests_for_an_address_get_the_429_page(alice):
    client = Client()
    for _ in range(3):
        response = client.post("/accounts/password/reset/", {"email": "alice@example.com"})
        assert response.status_code == 302
    sent = len(mail.outbox)
    assert_too_many(client.post("/accounts/password/reset/", {"email": "alice@example.com"}))
    assert len(mail.outbox) == sent
