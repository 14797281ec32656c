"""VS Code (code-server) through the instance proxy: served under its prefix, its session cookie added here."""

from __future__ import annotations

import uuid

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from console.tests.conftest import session_cookie

pytestmark = [pytest.mark.local, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def code(proxy_world, alice):
    if "code" not in proxy_world.runtime.services:
        pytest.skip("code-server is not installed (run `make local-deps`)")
    proxy_world.own(proxy_world.alice_key, alice)
    return proxy_world


def test_the_owner_opens_the_vs_code_workbench(code, alice):
    cookies = session_cookie(alice)
    first = httpx.get(code.url(code.alice_key, "code/"), cookies=cookies)
    assert first.status_code == 302
    location = first.headers["location"]
    assert "login" not in location  # the proxy's cookie got us past code-server's password page
    page = httpx.get(httpx.URL(code.url(code.alice_key, "code/")).join(location), cookies=cookies)
    assert page.status_code == 200
    assert "vs/workbench" in page.text or "workbench" in page.text
    secret = code.runtime.upstream(code.alice_key, "code").secret
    assert secret not in page.text
    assert all(secret not in value for value in page.headers.values())


def test_the_health_endpoint_answers_under_the_prefix(code, alice):
    response = httpx.get(code.url(code.alice_key, "code/healthz"), cookies=session_cookie(alice))
    assert response.status_code == 200
    assert response.json()["status"] in ("alive", "expired")


def test_code_server_refuses_a_request_without_the_proxy(code):
    upstream = code.runtime.upstream(code.alice_key, "code")
    direct = httpx.get(f"http://127.0.0.1:{upstream.port}/")
    assert direct.status_code == 302 and direct.headers["location"].startswith("./login")
    with (
        pytest.raises(InvalidStatus),
        connect(
            f"ws://127.0.0.1:{upstream.port}/?reconnectionToken={uuid.uuid4()}&reconnection=false&skipWebSocketFrames=false"
        ),
    ):
        pass


def test_the_workbench_websocket_opens_for_the_owner_only(code, alice, charlie):
    url = f"{code.ws_base}/i/{code.alice_key}/code/?reconnectionToken={uuid.uuid4()}&reconnection=false&skipWebSocketFrames=false"
    with connect(
        url, origin=code.base_url, additional_headers={"Cookie": f"sessionid={session_cookie(alice)['sessionid']}"}
    ) as ws:
        assert ws.protocol.state.name == "OPEN"
    with (
        pytest.raises(InvalidStatus) as refused,
        connect(
            url,
            origin=code.base_url,
            additional_headers={"Cookie": f"sessionid={session_cookie(charlie)['sessionid']}"},
        ),
    ):
        pass
    assert refused.value.response.status_code == 404


def test_a_stranger_gets_404_for_vs_code(code, charlie):
    for path in ("code/", "code/healthz", "code/login"):
        assert httpx.get(code.url(code.alice_key, path), cookies=session_cookie(charlie)).status_code == 404
