"""A command line logs in through the browser: start, confirm on the page, poll once for a token."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from accounts.models import APIToken
from devicelogin.models import DeviceAuthorization

START, TOKEN, PAGE = "/api/v1/account/device/", "/api/v1/account/device/token/", "/account/device/"


def _start(client) -> dict:
    response = client.post(START, {"client_name": "gpuctl on laptop"}, content_type="application/json")
    assert response.status_code == 201
    return response.json()


def _poll(client, started):
    return client.post(TOKEN, {"device_code": started["device_code"]}, content_type="application/json")


def test_confirmed_in_the_browser_the_poller_gets_one_token_of_that_user(client, alice, alice_client):
    started = _start(client)
    assert started["verification_uri_complete"].endswith(f"{PAGE}?code={started['user_code']}")
    assert _poll(client, started).json()["error"]["code"] == "authorization_pending"
    page = alice_client.get(PAGE, {"code": started["user_code"].lower().replace("-", " ")})
    assert page.status_code == 200 and "gpuctl on laptop" in page.content.decode()
    assert alice_client.post(PAGE, {"code": started["user_code"], "decision": "approve"}).status_code == 302
    token = _poll(client, started).json()["token"]
    assert client.get("/api/v1/account/profile/", HTTP_AUTHORIZATION=f"Bearer {token}").json()["email"] == alice.email
    assert APIToken.objects.get(user=alice).name == "gpuctl on laptop"
    assert _poll(client, started).status_code == 404  # spent: a second poll gets nothing


def test_refused_in_the_browser_the_poller_is_told_so(client, alice_client):
    started = _start(client)
    alice_client.post(PAGE, {"code": started["user_code"], "decision": "deny"})
    response = _poll(client, started)
    assert response.status_code == 409 and response.json()["error"]["code"] == "access_denied"
    assert not APIToken.objects.exists()


def test_an_expired_code_cannot_be_confirmed_and_the_poller_hears_expired(client, alice_client):
    started = _start(client)
    DeviceAuthorization.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    page = alice_client.post(PAGE, {"code": started["user_code"], "decision": "approve"})
    assert page.status_code == 400
    assert _poll(client, started).json()["error"]["code"] == "expired_token"


def test_an_unknown_code_is_a_404_and_the_page_needs_a_log_in(client, db):
    response = client.post(TOKEN, {"device_code": "nope"}, content_type="application/json")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert client.get(PAGE).status_code == 302


def test_a_code_is_confirmed_once(client, alice_client, charlie_client):
    started = _start(client)
    alice_client.post(PAGE, {"code": started["user_code"], "decision": "approve"})
    again = charlie_client.post(PAGE, {"code": started["user_code"], "decision": "approve"})
    assert again.status_code == 400
    assert DeviceAuthorization.objects.get().user.email == "alice@example.com"


def test_the_api_tokens_page_shows_the_command_line_with_this_console_s_address(alice_client):
    page = alice_client.get("/account/api-tokens/").content.decode()
    assert "gpuctl login --url http://testserver" in page and 'id="command-line"' in page
