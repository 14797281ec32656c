"""allauth's pages render inside the console's layout, with our forms and buttons."""

import re

import pytest
from django.core import mail
from django.test import Client

from accounts.models import User


def assert_console_card(response, card: str = "auth-card"):
    assert response.status_code == 200
    body = response.content.decode()
    assert f'class="card {card}"' in body
    assert "css/console.css" in body
    return body


@pytest.mark.parametrize(
    ("url", "text"),
    [
        ("/accounts/login/", "Log in"),
        ("/accounts/signup/", "Create your account"),
        ("/accounts/password/reset/", "Password Reset"),
        ("/accounts/password/reset/done/", "We have sent you an email"),
        ("/accounts/confirm-email/", "Check your inbox"),
        ("/accounts/confirm-email/not-a-key/", "expired or is invalid"),
        ("/accounts/password/reset/key/1-bad-key/", "Bad Token"),
        ("/accounts/password/reset/key/done/", "Your password is now changed."),
    ],
)
def test_the_entrance_pages_use_the_console_card(db, url, text):
    body = assert_console_card(Client().get(url))
    assert text in body


def test_the_login_form_uses_our_fields_and_buttons(db):
    body = Client().get("/accounts/login/").content.decode()
    assert '<div class="field">' in body
    assert '<button class="primary" type="submit">' in body
    assert "Forgot your password?" in body
    assert 'class="choice-label"' in body  # "Remember me"


def test_a_wrong_password_shows_an_error_above_the_form(alice):
    response = Client().post("/accounts/login/", {"login": "alice@example.com", "password": "nope nope nope"})
    assert '<div class="alert error" role="alert">' in response.content.decode()


@pytest.mark.parametrize(
    ("url", "text"),
    [
        ("/accounts/password/change/", "Change Password"),
        ("/accounts/email/", "alice@example.com"),
        ("/accounts/logout/", "Are you sure you want to sign out?"),
    ],
)
def test_the_manage_pages_sit_in_the_console_shell_with_the_account_tabs(alice_client, url, text):
    body = assert_console_card(alice_client.get(url), card="manage-card")
    assert text in body
    assert 'class="sidebar"' in body
    assert 'class="tabs"' in body


def test_sign_up_verify_and_land_logged_in(db):
    client = Client()
    response = client.post(
        "/accounts/signup/",
        {
            "email": "Dora@Example.com",
            "password1": "a long passphrase 42",
            "password2": "a long passphrase 42",
            "accept_terms": "on",
        },
        follow=True,
    )
    assert "Check your inbox" in response.content.decode()
    assert client.get("/dashboard/").status_code == 302  # not logged in before verifying

    assert len(mail.outbox) == 1
    assert mail.outbox[0].body.startswith("Hello from GPU Console!")
    link = re.search(r"https?://\S+/accounts/confirm-email/\S+/", mail.outbox[0].body).group(0)
    path = link.split("testserver", 1)[1]
    body = assert_console_card(client.get(path))
    assert "dora@example.com" in body
    response = client.post(path, follow=True)
    assert response.redirect_chain[-1][0] == "/dashboard/"
    assert "Welcome, dora" in response.content.decode()
    assert User.objects.get().email == "dora@example.com"


def test_a_password_reset_from_the_e_mail_link(alice):
    client = Client()
    client.post("/accounts/password/reset/", {"email": "alice@example.com"})
    link = re.search(r"https?://testserver(/accounts/password/reset/key/\S+/)", mail.outbox[0].body).group(1)
    form_url = client.get(link).url  # allauth moves the key into the session and redirects
    body = assert_console_card(client.get(form_url))
    assert "Change Password" in body
    response = client.post(form_url, {"password1": "a new passphrase 42", "password2": "a new passphrase 42"})
    assert response.status_code == 302
    alice.refresh_from_db()
    assert alice.check_password("a new passphrase 42")


def test_the_password_change_page_changes_the_password(alice, alice_client):
    from accounts.tests.factories import DEFAULT_PASSWORD

    response = alice_client.post(
        "/accounts/password/change/",
        {"oldpassword": DEFAULT_PASSWORD, "password1": "a new passphrase 42", "password2": "a new passphrase 42"},
    )
    assert response.status_code == 302
    alice.refresh_from_db()
    assert alice.check_password("a new passphrase 42")


def test_the_429_page_is_ours(rf, db):
    from allauth.core.ratelimit import respond_429
    from django.contrib.auth.models import AnonymousUser

    request = rf.get("/")
    request.user = AnonymousUser()
    response = respond_429(request)
    assert response.status_code == 429
    assert "Too many attempts" in response.content.decode()
