"""Each change to a user's credentials, and each log-in, writes one event to their security log."""

from __future__ import annotations

import re

import pytest
from allauth.account.models import EmailAddress
from django.core import mail
from django.core.exceptions import ValidationError
from django.test import Client

from accounts.models import APIToken, SecurityEvent
from accounts.services import api_token_create, ssh_key_add, ssh_key_delete
from accounts.tests.factories import DEFAULT_PASSWORD
from accounts.tests.keys import ed25519_public

Action = SecurityEvent.Action
BROWSER = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"


def browser() -> Client:
    return Client(HTTP_USER_AGENT=BROWSER, REMOTE_ADDR="203.0.113.7")


def actions(user) -> list[str]:
    return list(SecurityEvent.objects.filter(user=user).order_by("id").values_list("action", flat=True))


def last(user) -> SecurityEvent:
    return SecurityEvent.objects.filter(user=user).latest("id")


def test_a_log_in_is_logged_with_the_address_and_browser(alice):
    response = browser().post("/accounts/login/", {"login": "alice@example.com", "password": DEFAULT_PASSWORD})
    assert response.status_code == 302
    assert actions(alice) == [Action.LOGIN]
    event = last(alice)
    assert event.ip == "203.0.113.7"
    assert event.user_agent == BROWSER
    assert event.device == "Firefox on Linux"


def test_a_wrong_password_is_logged_for_the_account_it_tried(alice):
    response = browser().post("/accounts/login/", {"login": "ALICE@example.com", "password": "not it"})
    assert response.status_code == 200
    assert actions(alice) == [Action.LOGIN_FAILED]
    assert last(alice).ip == "203.0.113.7"


def test_a_failed_log_in_with_an_unknown_address_logs_nothing(alice):
    browser().post("/accounts/login/", {"login": "nobody@example.com", "password": "whatever"})
    assert not SecurityEvent.objects.exists()


def test_a_log_out_is_logged(alice):
    client = browser()
    client.post("/accounts/login/", {"login": "alice@example.com", "password": DEFAULT_PASSWORD})
    client.post("/accounts/logout/")
    assert actions(alice) == [Action.LOGIN, Action.LOGOUT]


def test_a_password_change_is_logged(alice):
    client = browser()
    client.force_login(alice)
    response = client.post(
        "/accounts/password/change/",
        {"oldpassword": DEFAULT_PASSWORD, "password1": "a new long passphrase", "password2": "a new long passphrase"},
    )
    assert response.status_code == 302
    assert actions(alice)[-1] == Action.PASSWORD_CHANGED
    assert last(alice).ip == "203.0.113.7"


def test_a_password_reset_through_the_emailed_link_is_logged(alice):
    client = browser()
    client.post("/accounts/password/reset/", {"email": "alice@example.com"})
    link = re.search(r"https?://[^/\s]+(/accounts/password/reset/key/\S+)", mail.outbox[-1].body).group(1)
    form_url = client.get(link).url  # allauth moves the key into the session, then shows the form
    response = client.post(form_url, {"password1": "a new long passphrase", "password2": "a new long passphrase"})
    assert response.status_code == 302
    assert Action.PASSWORD_RESET in actions(alice)


def test_a_new_primary_e_mail_address_is_logged_with_both_addresses(alice):
    EmailAddress.objects.create(user=alice, email="alice@new.example.com", verified=True, primary=False)
    client = browser()
    client.force_login(alice)
    response = client.post("/accounts/email/", {"action_primary": "", "email": "alice@new.example.com"})
    assert response.status_code == 302
    event = last(alice)
    assert event.action == Action.EMAIL_CHANGED
    assert event.details == {"from": "alice@example.com", "to": "alice@new.example.com"}


@pytest.mark.parametrize("through", ["page", "api"])
def test_adding_and_removing_an_ssh_key_is_logged(alice, through):
    client = browser()
    client.force_login(alice)
    if through == "page":
        client.post("/account/ssh-keys/", {"name": "laptop", "public_key": ed25519_public()})
    else:
        client.post(
            "/api/v1/account/ssh-keys/",
            {"name": "laptop", "public_key": ed25519_public()},
            content_type="application/json",
        )
    key = alice.ssh_keys.get()
    added = last(alice)
    assert added.action == Action.SSH_KEY_ADDED
    assert added.details == {"name": "laptop", "fingerprint": key.fingerprint}
    assert added.ip == "203.0.113.7"
    if through == "page":
        client.post(f"/account/ssh-keys/{key.pk}/delete/")
    else:
        client.delete(f"/api/v1/account/ssh-keys/{key.pk}/")
    removed = last(alice)
    assert removed.action == Action.SSH_KEY_REMOVED
    assert removed.details == {"name": "laptop", "fingerprint": key.fingerprint}


def test_a_refused_key_logs_nothing(alice):
    with pytest.raises(ValidationError):
        ssh_key_add(user=alice, name="bad", public_key="not a key")
    assert not SecurityEvent.objects.filter(user=alice).exists()


@pytest.mark.parametrize("through", ["page", "api"])
def test_creating_and_revoking_a_token_is_logged(alice, through):
    client = browser()
    client.force_login(alice)
    if through == "page":
        client.post("/account/api-tokens/", {"name": "CI", "expires": "30", "scope": "read"})
    else:
        client.post("/api/v1/account/tokens/", {"name": "CI", "scope": "read"}, content_type="application/json")
    token = alice.api_tokens.get()
    created = last(alice)
    assert created.action == Action.TOKEN_CREATED
    assert created.details == {"name": "CI", "prefix": token.prefix, "scope": "read"}
    if through == "page":
        client.post(f"/account/api-tokens/{token.pk}/revoke/")
        client.post(f"/account/api-tokens/{token.pk}/revoke/")  # twice: one event
    else:
        client.delete(f"/api/v1/account/tokens/{token.pk}/")
        client.delete(f"/api/v1/account/tokens/{token.pk}/")
    assert actions(alice).count(Action.TOKEN_REVOKED) == 1
    assert last(alice).details == {"name": "CI", "prefix": token.prefix}


def test_no_secret_reaches_the_log(alice):
    _token, raw = api_token_create(user=alice, name="CI", expires_at=None)
    assert raw not in str(list(SecurityEvent.objects.values()))
    assert APIToken.objects.get().digest not in str(list(SecurityEvent.objects.values()))


def test_using_a_token_logs_nothing(alice):
    _token, raw = api_token_create(user=alice, name="CI", expires_at=None)
    before = SecurityEvent.objects.count()
    for _ in range(3):
        assert Client().get("/api/v1/account/profile/", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200
    assert SecurityEvent.objects.count() == before


def test_deleting_a_key_twice_logs_it_once(alice):
    key = ssh_key_add(user=alice, name="laptop", public_key=ed25519_public())
    assert ssh_key_delete(user=alice, key_id=key.pk) is True
    assert ssh_key_delete(user=alice, key_id=key.pk) is False
    assert actions(alice).count(Action.SSH_KEY_REMOVED) == 1


def test_another_users_key_is_not_deleted_nor_logged(alice, charlie):
    key = ssh_key_add(user=alice, name="laptop", public_key=ed25519_public())
    assert ssh_key_delete(user=charlie, key_id=key.pk) is False
    assert not SecurityEvent.objects.filter(user=charlie).exists()
    assert actions(alice) == [Action.SSH_KEY_ADDED]
