"""The security log page and endpoint: one's own events only, newest first, in the reader's language."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.signals import user_logged_in
from django.test import Client
from django.utils import timezone
from factory.django import mute_signals

from accounts.models import SecurityEvent
from accounts.services import api_token_create, security_event_record, ssh_key_add
from accounts.tests.keys import ed25519_public
from core.appendonly import AppendOnlyError

Action = SecurityEvent.Action
PAGE = "/account/security/"
API = "/api/v1/account/security-events/"
CHROME_MAC = (
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Safari/537.36"
)


@pytest.fixture
def logs(alice, charlie):
    security_event_record(user=alice, action=Action.LOGIN, ip="198.51.100.1", user_agent=CHROME_MAC)
    security_event_record(user=alice, action=Action.SSH_KEY_ADDED, details={"name": "alice-laptop"})
    security_event_record(user=charlie, action=Action.LOGIN_FAILED, ip="192.0.2.99", details={"name": "charlie-box"})


def test_the_page_lists_ones_own_events_newest_first(logs, alice):
    client = Client()
    client.force_login(alice)  # itself a log-in: the newest row
    html = client.get(PAGE).content.decode()
    assert "alice-laptop" in html and "198.51.100.1" in html and "Chrome on macOS" in html
    assert "charlie-box" not in html and "192.0.2.99" not in html
    assert html.index("SSH key added") < html.index("198.51.100.1")


def test_the_page_speaks_the_readers_language(logs, alice):
    client = Client(HTTP_ACCEPT_LANGUAGE="zh-hans")
    client.force_login(alice)
    html = client.get(PAGE).content.decode()
    assert 'lang="zh-hans"' in html
    assert "个人资料" in html  # the account tabs; the action names are the model's choices, marked for translation


def test_the_page_is_paginated(alice_client, alice):
    for _ in range(60):
        security_event_record(user=alice, action=Action.LOGIN)
    first = alice_client.get(PAGE)
    assert first.content.decode().count("<tr>") == 1 + 50  # the header row and a page of 50
    second = alice_client.get(PAGE, {"page": 2})
    assert second.status_code == 200
    assert "Page 2 of 2" in second.content.decode()


def test_the_page_says_what_to_expect_when_empty(charlie):
    client = Client()
    with mute_signals(user_logged_in):  # a log-in is itself an event
        client.force_login(charlie)
    assert not SecurityEvent.objects.filter(user=charlie).exists()
    assert "Nothing yet" in client.get(PAGE).content.decode()


def test_the_account_menu_links_the_page(alice_client):
    assert 'href="/account/security/"' in alice_client.get("/account/").content.decode()


def test_the_api_lists_ones_own_events_only(logs, alice, charlie):
    _token, raw = api_token_create(user=alice, name="read", expires_at=None, scope="read")
    response = Client().get(API, HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 200
    rows = response.json()["results"]
    assert {row["action"] for row in rows} == {"login", "ssh_key_added", "token_created"}
    assert rows[0]["action"] == "token_created"  # newest first
    login = next(row for row in rows if row["action"] == "login")
    assert login["ip"] == "198.51.100.1"
    assert login["device"] == "Chrome on macOS"
    assert login["action_label"] == "Logged in"
    assert "192.0.2.99" not in response.content.decode()


def test_the_api_refuses_writes(alice_client):
    assert alice_client.post(API, {}, content_type="application/json").status_code == 405


def test_the_api_keeps_a_query_budget(alice, alice_client, django_assert_max_num_queries):
    for _ in range(30):
        security_event_record(user=alice, action=Action.LOGIN)
    with django_assert_max_num_queries(6):
        assert alice_client.get(API).status_code == 200


def test_events_cannot_be_edited_or_deleted(alice):
    event = security_event_record(user=alice, action=Action.LOGIN)
    event.action = Action.LOGOUT
    with pytest.raises(AppendOnlyError):
        event.save()
    with pytest.raises(AppendOnlyError):
        event.delete()
    with pytest.raises(AppendOnlyError):
        SecurityEvent.objects.filter(user=alice).update(created_at=timezone.now() - timedelta(days=1))
    with pytest.raises(AppendOnlyError):
        SecurityEvent.objects.filter(user=alice).delete()


def test_a_malformed_address_is_dropped_and_a_long_user_agent_cut(alice):
    event = security_event_record(user=alice, action=Action.LOGIN, ip="not-an-ip", user_agent="x" * 1000)
    event.refresh_from_db()
    assert event.ip is None
    assert len(event.user_agent) == SecurityEvent.USER_AGENT_MAX


def test_deleting_the_user_takes_their_log_with_them(alice, charlie):
    security_event_record(user=alice, action=Action.LOGIN)
    security_event_record(user=charlie, action=Action.LOGIN)
    alice.delete()
    assert list(SecurityEvent.objects.values_list("user", flat=True)) == [charlie.pk]


def test_staff_read_the_log_in_the_admin_but_cannot_change_it(staff, alice, client_for):
    security_event_record(user=alice, action=Action.LOGIN, ip="198.51.100.1")
    client = client_for(staff)
    listing = client.get("/admin/accounts/securityevent/")
    assert listing.status_code == 200 and "198.51.100.1" in listing.content.decode()
    event = SecurityEvent.objects.filter(user=alice).first()
    assert client.post(f"/admin/accounts/securityevent/{event.pk}/delete/", {"post": "yes"}).status_code == 403


def test_staff_removing_a_key_or_revoking_a_token_shows_in_the_users_log(staff, alice, client_for):
    key = ssh_key_add(user=alice, name="laptop", public_key=ed25519_public())
    token, _raw = api_token_create(user=alice, name="CI", expires_at=None)
    client = client_for(staff)
    client.post("/admin/accounts/sshkey/", {"action": "delete_selected", "_selected_action": [key.pk], "post": "yes"})
    client.post("/admin/accounts/apitoken/", {"action": "revoke", "_selected_action": [token.pk]})
    removed = SecurityEvent.objects.get(user=alice, action=Action.SSH_KEY_REMOVED)
    revoked = SecurityEvent.objects.get(user=alice, action=Action.TOKEN_REVOKED)
    assert removed.details["by"] == "staff" and revoked.details["by"] == "staff"
    assert removed.ip is None  # staff's own address is not shown to the user


def test_the_page_keeps_a_query_budget(alice, alice_client, django_assert_max_num_queries):
    for _ in range(60):
        security_event_record(user=alice, action=Action.SSH_KEY_ADDED, details={"name": "k"}, user_agent=CHROME_MAC)
    # the session, the user, the count, a page of rows, the menu, the bell, the teams switcher: none per row
    with django_assert_max_num_queries(7):
        assert alice_client.get(PAGE).status_code == 200
