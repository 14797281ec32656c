"""A device log-in shows in the user's security log: the approval in the browser, then the token it made."""

from __future__ import annotations

from django.test import Client

from accounts.models import SecurityEvent

START, TOKEN, PAGE = "/api/v1/account/device/", "/api/v1/account/device/token/", "/account/device/"


def test_an_approved_device_log_in_is_logged_then_its_token(alice):
    terminal = Client(HTTP_USER_AGENT="gpuctl/0.3 python-httpx/0.28", REMOTE_ADDR="198.51.100.20")
    browser = Client(HTTP_USER_AGENT="Mozilla/5.0 (Windows NT 10.0; Win64; x64) Firefox/133.0")
    browser.force_login(alice)
    started = terminal.post(START, {"client_name": "gpuctl on laptop"}, content_type="application/json").json()
    browser.post(PAGE, {"code": started["user_code"], "decision": "approve"})
    terminal.post(TOKEN, {"device_code": started["device_code"]}, content_type="application/json")

    approved, created = SecurityEvent.objects.filter(user=alice).exclude(action="login").order_by("id")
    assert approved.action == SecurityEvent.Action.DEVICE_LOGIN_APPROVED
    assert approved.details == {"client": "gpuctl on laptop", "scope": "full"}
    assert approved.device == "Firefox on Windows"
    assert created.action == SecurityEvent.Action.TOKEN_CREATED
    assert created.details["via"] == "device_login" and created.details["scope"] == "full"
    assert created.ip == "198.51.100.20" and created.device == "gpuctl"


def test_a_refused_device_log_in_logs_no_approval(alice):
    browser = Client()
    browser.force_login(alice)
    started = Client().post(START, {}, content_type="application/json").json()
    browser.post(PAGE, {"code": started["user_code"], "decision": "deny"})
    assert not SecurityEvent.objects.filter(user=alice).exclude(action="login").exists()


def test_a_command_line_may_ask_for_a_read_only_token_and_the_page_says_so(alice):
    browser = Client()
    browser.force_login(alice)
    terminal = Client()
    started = terminal.post(START, {"client_name": "grafana", "scope": "read"}, content_type="application/json").json()
    page = browser.get(PAGE, {"code": started["user_code"]}).content.decode()
    assert "read-only" in page
    browser.post(PAGE, {"code": started["user_code"], "decision": "approve"})
    raw = terminal.post(TOKEN, {"device_code": started["device_code"]}, content_type="application/json").json()["token"]
    assert alice.api_tokens.get().scope == "read"
    refused = terminal.post(
        "/api/v1/instances/", {}, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}"
    )
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "read_only_token"
    approved = SecurityEvent.objects.get(user=alice, action=SecurityEvent.Action.DEVICE_LOGIN_APPROVED)
    assert approved.details == {"client": "grafana", "scope": "read"}


def test_an_unknown_scope_is_a_400(db):
    response = Client().post(START, {"scope": "admin"}, content_type="application/json")
    assert response.status_code == 400 and "scope" in response.json()["error"]["fields"]
