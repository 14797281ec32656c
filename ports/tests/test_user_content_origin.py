"""User content on its own host (CONSOLE_PROXY_HOST): a one-time hand-off from the console signs the
browser in there with that host's own cookie; the console's session counts for nothing there, and
neither cookie reaches the user's server."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
import pytest

from console.tests.conftest import session_cookie
from ports.services import port_declare, share_create

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def content_host(settings, console_url):
    """The user-content host: apps.localhost on the test server's port (subdomains of localhost need no
    DNS in browsers; here every request goes to 127.0.0.1 with that Host header)."""
    port = urlsplit(console_url).port
    settings.CONSOLE_PROXY_HOST = f"apps.localhost:{port}"
    return settings.CONSOLE_PROXY_HOST


def on_content_host(console_url: str, url: str, content_host: str, **kwargs) -> httpx.Response:
    """GET a URL of the user-content host, sent to the test server with that host's name."""
    parts = urlsplit(url)
    target = f"{console_url}{parts.path}" + (f"?{parts.query}" if parts.query else "")
    return httpx.get(target, headers={"Host": content_host}, timeout=10, **kwargs)


def test_the_hand_off_signs_the_browser_in_on_the_content_host_once(
    alice_instance, alice, charlie, client_for, console_url, content_host, user_server
):
    port = port_declare(instance=alice_instance, port=user_server, name="TensorBoard")
    # The page's link goes through the console's hand-off, not straight to the other host.
    api = client_for(alice).get(f"/api/v1/instances/{alice_instance.pk}/ports/").json()
    assert api[0]["url"] == f"/open/?next=/i/{alice_instance.pk}/p{user_server}/"

    session = session_cookie(alice)
    start = httpx.get(f"{console_url}{api[0]['url']}data", cookies=session, timeout=10)
    assert start.status_code == 302
    handoff = start.headers["location"]
    assert handoff.startswith(f"http://{content_host}/i/_handoff?token=")

    redeemed = on_content_host(console_url, handoff, content_host)
    assert redeemed.status_code == 302
    assert redeemed.headers["location"] == f"/i/{alice_instance.pk}/p{user_server}/data"
    set_cookie = redeemed.headers["set-cookie"]
    assert set_cookie.startswith("console_content=")
    assert "HttpOnly" in set_cookie and "Path=/" in set_cookie and "Domain" not in set_cookie
    content_cookie = redeemed.cookies["console_content"]

    served = on_content_host(
        console_url,
        redeemed.headers["location"],
        content_host,
        cookies={"console_content": content_cookie, **session, "theirs": "1"},
    )
    assert served.status_code == 200
    assert served.text.startswith("path=/data cookie=theirs=1")  # neither console cookie went upstream

    # Once only: the same token again is refused, and so is a forged one.
    assert on_content_host(console_url, handoff, content_host).status_code == 403
    forged = handoff.replace("token=", "token=x")
    assert on_content_host(console_url, forged, content_host).status_code == 403

    # On the content host the console's session is nobody: without the host's own cookie, a 404.
    assert on_content_host(console_url, port.path, content_host, cookies=session).status_code == 404
    # Charlie signed in there is not Alice.
    charlie_start = httpx.get(f"{console_url}{api[0]['url']}", cookies=session_cookie(charlie), timeout=10)
    charlie_in = on_content_host(console_url, charlie_start.headers["location"], content_host)
    charlie_cookie = charlie_in.cookies["console_content"]
    assert (
        on_content_host(console_url, port.path, content_host, cookies={"console_content": charlie_cookie}).status_code
        == 404
    )


def test_the_console_host_serves_no_user_content_and_share_links_live_on_the_content_host(
    alice_instance, alice, console_url, content_host, user_server
):
    port = port_declare(instance=alice_instance, port=user_server)
    assert httpx.get(f"{console_url}{port.path}", cookies=session_cookie(alice), timeout=10).status_code == 404
    share = share_create(port=port)
    assert share.url == f"//{content_host}{share.path}"
    public = on_content_host(console_url, f"http:{share.url}", content_host)
    assert public.status_code == 200 and public.text.startswith("path=/")


def test_the_hand_off_is_no_open_redirect(alice, client_for, content_host):
    client = client_for(alice)
    for next_path in ("https://evil.example/", "//evil.example/i/", "/accounts/logout/", "/i/_handoff"):
        assert client.get("/open/", {"next": next_path}).status_code == 404
    assert client_for(alice).get("/open/", {"next": "/i/abc/lab/"}).status_code == 302
