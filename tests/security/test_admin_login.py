"""The admin has no log-in of its own: ``/admin/login/`` sends the browser to the console's log-in (with
its rate limits), and a staff member signed in there reaches the admin. Passwords posted to the admin's
page are never checked there, so it cannot be used to guess them beside the console's limits."""

from __future__ import annotations

from django.conf import settings
from django.test import Client
from django.urls import reverse

from accounts.tests.factories import DEFAULT_PASSWORD, totp_code

CONSOLE_LOGIN = "/accounts/login/"


def test_the_admins_log_in_page_redirects_to_the_consoles(client, db):
    response = client.get("/admin/login/")
    assert response.status_code == 302
    assert response["Location"] == f"{CONSOLE_LOGIN}?next=/admin/"
    kept = client.get("/admin/login/", {"next": "/admin/accounts/user/"})
    assert kept["Location"] == f"{CONSOLE_LOGIN}?next=/admin/accounts/user/"
    elsewhere = client.get("/admin/login/", {"next": "https://evil.example/"})
    assert elsewhere["Location"] == f"{CONSOLE_LOGIN}?next=/admin/"  # no open redirect


def test_the_admin_signed_out_ends_on_the_consoles_log_in(client, db):
    response = client.get("/admin/", follow=True)
    assert response.redirect_chain[-1][0].startswith(f"{CONSOLE_LOGIN}?next=")
    assert response.status_code == 200


def test_a_password_posted_to_the_admins_page_signs_nobody_in(client, staff):
    response = client.post("/admin/login/", {"username": staff.email, "password": DEFAULT_PASSWORD})
    assert response.status_code == 302 and response["Location"].startswith(CONSOLE_LOGIN)
    assert settings.SESSION_COOKIE_NAME not in response.cookies
    assert client.get("/admin/").status_code == 302


def test_staff_sign_in_through_the_console_and_reach_the_admin(staff):
    browser = Client()
    start = browser.get("/admin/", follow=True)
    login_url = start.redirect_chain[-1][0]
    assert login_url.startswith(CONSOLE_LOGIN)
    second_step = browser.post(login_url, {"login": staff.email, "password": DEFAULT_PASSWORD}, follow=True)
    # Staff sign in with a second factor (tests/security/test_two_factor_sign_in.py).
    assert second_step.redirect_chain[-1][0] == reverse("mfa_authenticate")
    signed_in = browser.post(reverse("mfa_authenticate"), {"code": totp_code()}, follow=True)
    assert signed_in.redirect_chain[-1][0] == reverse("admin:index")
    assert signed_in.status_code == 200
    assert b"Site administration" in signed_in.content


def test_a_signed_in_member_who_is_not_staff_is_refused_not_sent_round(alice_client):
    assert alice_client.get("/admin/login/").status_code == 403
