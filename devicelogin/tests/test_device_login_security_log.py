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
    assert approved.details == {"client": "gpuctl on laptop"}
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
