"""The user's language: taken from the browser at sign-up, edited on the profile, applied at log-in
(Django's language cookie), and read by workers (notifications' tests)."""

from __future__ import annotations

from django.conf import settings
from django.test import Client

from accounts.models import User
from accounts.tests.factories import DEFAULT_PASSWORD


def test_sign_up_takes_the_browser_s_language(db):
    client = Client(HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9,en;q=0.5")
    client.post(
        "/accounts/signup/",
        {
            "email": "mei@example.com",
            "password1": "a long passphrase 42",
            "password2": "a long passphrase 42",
            "accept_terms": "on",
        },
    )
    assert User.objects.get(email="mei@example.com").language == "zh-hans"
    Client().post(
        "/accounts/signup/",
        {
            "email": "bo@example.com",
            "password1": "a long passphrase 42",
            "password2": "a long passphrase 42",
            "accept_terms": "on",
        },
    )
    assert User.objects.get(email="bo@example.com").language == settings.LANGUAGE_CODE


def test_log_in_applies_the_user_s_language(alice):
    alice.language = "zh-hans"
    alice.save(update_fields=["language"])
    client = Client(HTTP_ACCEPT_LANGUAGE="en")
    response = client.post("/accounts/login/", {"login": "alice@example.com", "password": DEFAULT_PASSWORD})
    assert response.status_code == 302
    assert response.cookies[settings.LANGUAGE_COOKIE_NAME].value == "zh-hans"
    assert '<html lang="zh-hans">' in client.get("/dashboard/").content.decode()


def test_the_profile_edits_the_language(alice, alice_client):
    response = alice_client.post("/account/", {"display_name": "Alice", "language": "zh-hans"})
    assert response.status_code == 302
    alice.refresh_from_db()
    assert alice.language == "zh-hans"
    assert response.cookies[settings.LANGUAGE_COOKIE_NAME].value == "zh-hans"
    assert alice_client.post("/account/", {"display_name": "Alice", "language": "xx"}).status_code == 200  # form error
    alice.refresh_from_db()
    assert alice.language == "zh-hans"


def test_the_api_edits_the_language(alice, alice_client):
    answer = alice_client.patch("/api/v1/account/profile/", {"language": "zh-hans"}, content_type="application/json")
    assert answer.status_code == 200 and answer.json()["language"] == "zh-hans"
    bad = alice_client.patch("/api/v1/account/profile/", {"language": "xx"}, content_type="application/json")
    assert bad.status_code == 400
