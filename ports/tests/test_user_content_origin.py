"""User content on hosts of its own (CONSOLE_PROXY_HOST names their domain; each instance is at
``<label>.<domain>``): a one-time hand-off from the console signs the browser in on the instance's host
with that host's own cookie; the console's session counts for nothing there, neither cookie reaches the
user's server, and neither the token nor the cookie of one instance's host is any good on another's."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
import pytest

from console.tests.conftest import session_cookie
from core.user_content import content_host, content_label
from instances.tests.conftest import running
from ports.services import port_declare, share_create

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def content_domain(settings, console_url):
    """The user-content domain: apps.localhost on the test server's port (subdomains of localhost need no
    DNS in browsers; here every request goes to 127.0.0.1 with that Host header)."""
    port = urlsplit(console_url).port
    settings.CONSOLE_PROXY_HOST = f"apps.localhost:{port}"
    return settings.CONSOLE_PROXY_HOST


def on_content_host(console_url: str, url: str, host: str, **kwargs) -> httpx.Response:
    """GET a URL of a user-content host, sent to the test server with that host's name."""
    parts = urlsplit(url)
    target = f"{console_url}{parts.path}" + (f"?{parts.query}" if parts.query else "")
    return httpx.get(target, headers={"Host": host}, timeout=10, **kwargs)


def test_the_hand_off_signs_the_browser_in_on_the_instances_host_once(
    alice_instance, alice, charlie, client_for, console_url, content_domain, user_server
):
    port = port_declare(instance=alice_instance, port=user_server, name="TensorBoard")
    host = content_host(alice_instance.pk)
    assert host == f"{alice_instance.pk.hex[:16]}.{content_domain}"
    # The page's link goes through the console's hand-off, not straight to the other host.
    api = client_for(alice).get(f"/api/v1/instances/{alice_instance.pk}/ports/").json()
    assert api[0]["url"] == f"/open/?next=/i/{alice_instance.pk}/p{user_server}/"

    session = session_cookie(alice)
    start = httpx.get(f"{console_url}{api[0]['url']}data", cookies=session, timeout=10)
    assert start.status_code == 302
    handoff = start.headers["location"]
    assert handoff.startswith(f"http://{host}/i/_handoff?token=")

    redeemed = on_content_host(console_url, handoff, host)
    assert redeemed.status_code == 302
    assert redeemed.headers["location"] == f"/i/{alice_instance.pk}/p{user_server}/data"
    set_cookie = redeemed.headers["set-cookie"]
    assert set_cookie.startswith("console_content=")
    assert "HttpOnly" in set_cookie and "Path=/" in set_cookie and "Domain" not in set_cookie
    content_cookie = redeemed.cookies["console_content"]

    served = on_content_host(
        console_url,
        redeemed.headers["location"],
        host,
        cookies={"console_content": content_cookie, **session, "theirs": "1"},
    )
    assert served.status_code == 200
    assert served.text.startswith("path=/data cookie=theirs=1")  # neither console cookie went upstream

    # Once only: the same token again is refused, and so is a forged one.
    assert on_content_host(console_url, handoff, host).status_code == 403
    forged = handoff.replace("token=", "token=x")
    assert on_content_host(console_url, forged, host).status_code == 403

    # On the content host the console's session is nobody: without the host's own cookie, a 404.
    assert on_content_host(console_url, port.path, host, cookies=session).status_code == 404
    # Charlie signed in there is not Alice.
    charlie_start = httpx.get(f"{console_url}{api[0]['url']}", cookies=session_cookie(charlie), timeout=10)
    charlie_in = on_content_host(console_url, charlie_start.headers["location"], host)
    charlie_cookie = charlie_in.cookies["console_content"]
    assert on_content_host(console_url, port.path, host, cookies={"console_content": charlie_cookie}).status_code == 404


def test_the_console_host_serves_no_user_content_and_share_links_live_on_the_instances_host(
    alice_instance, alice, console_url, content_domain, user_server
):
    port = port_declare(instance=alice_instance, port=user_server)
    # The console's host serves none of it: a server's path there goes to the hand-off.
    on_console = httpx.get(f"{console_url}{port.path}", cookies=session_cookie(alice), timeout=10)
    assert on_console.status_code == 302 and not on_console.content
    assert on_console.headers["location"] == f"/open/?next={port.path}"
    share = share_create(port=port)
    host = content_host(alice_instance.pk)
    assert share.url == f"//{host}{share.path}"
    shared_on_console = httpx.get(f"{console_url}{share.path}", cookies=session_cookie(alice), timeout=10)
    assert shared_on_console.status_code == 302 and not shared_on_console.content
    assert shared_on_console.headers["location"] == share.url
    public = on_content_host(console_url, f"http:{share.url}", host)
    assert public.status_code == 200 and public.text.startswith("path=/")
    # Only on its instance's host: not on the bare domain, not on another instance's host.
    other = content_host("00000000-0000-4000-8000-000000000000")
    for elsewhere in (content_domain, other):
        assert on_content_host(console_url, f"http:{share.url}", elsewhere).status_code == 404


def test_one_instances_host_is_no_other_instances(
    alice_instance, alice, client_for, console_url, content_domain, user_server
):
    """Alice's two instances: signed in on the first's host, the second's paths are not served there,
    the first's cookie is nobody on the second's host, and the second's hand-off cannot be redeemed on
    the first's."""
    other = running(alice, name="other")
    first = port_declare(instance=alice_instance, port=user_server)
    second = port_declare(instance=other, port=user_server)
    session = session_cookie(alice)
    first_host, second_host = content_host(alice_instance.pk), content_host(other.pk)
    assert first_host != second_host and second_host.startswith(content_label(other.pk) + ".")

    start = httpx.get(f"{console_url}/open/?next={first.path}", cookies=session, timeout=10)
    signed_in = on_content_host(console_url, start.headers["location"], first_host)
    cookie = {"console_content": signed_in.cookies["console_content"]}
    assert on_content_host(console_url, first.path, first_host, cookies=cookie).status_code == 200
    # The second instance's path, asked of the first's host, with the first's cookie: not here.
    assert on_content_host(console_url, second.path, first_host, cookies=cookie).status_code == 404
    # The first's cookie carried to the second's host signs nobody in.
    assert on_content_host(console_url, second.path, second_host, cookies=cookie).status_code == 404

    # A hand-off for the second instance, taken to the first's host, is refused.
    start = httpx.get(f"{console_url}/open/?next={second.path}", cookies=session, timeout=10)
    handoff = start.headers["location"]
    assert handoff.startswith(f"http://{second_host}/i/_handoff?token=")
    assert on_content_host(console_url, handoff, first_host).status_code == 403
    # Redeemed where it belongs it works, and that cookie opens the second instance only.
    redeemed = on_content_host(console_url, handoff, second_host)
    assert redeemed.status_code == 302
    second_cookie = {"console_content": redeemed.cookies["console_content"]}
    assert on_content_host(console_url, second.path, second_host, cookies=second_cookie).status_code == 200
    assert on_content_host(console_url, first.path, first_host, cookies=second_cookie).status_code == 404


def test_the_hand_off_is_no_open_redirect(alice, client_for, content_domain):
    client = client_for(alice)
    for next_path in (
        "https://evil.example/",
        "//evil.example/i/",
        "/accounts/logout/",
        "/i/_handoff",
        "/i/abc/lab/",  # no instance's id: no host to send it to
    ):
        assert client.get("/open/", {"next": next_path}).status_code == 404
    instance_id = "3f2a9c1b-0000-4000-8000-000000000000"
    opened = client_for(alice).get("/open/", {"next": f"/i/{instance_id}/lab/"})
    assert opened.status_code == 302
    assert opened["Location"].startswith(f"http://3f2a9c1b00004000.{content_domain}/i/_handoff?token=")
