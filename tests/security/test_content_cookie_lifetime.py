"""The user-content cookie ends with the console session that handed it off (issue #24).

Signed in on an instance's host by the one-time hand-off, a browser stays signed in there only while
its console session lasts: logging out, or a password change, ends it on the instance's host too,
not ``CONSOLE_PROXY_COOKIE_AGE_S`` (12 hours) later.
"""

from __future__ import annotations

import httpx
import pytest
from django.test import Client

from core.user_content import content_host
from ports.services import port_declare
from ports.tests.conftest import alice_instance, console_url, simulated_here, user_server  # noqa: F401 (fixtures)
from ports.tests.test_user_content_origin import content_domain, on_content_host  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def signed_in_on_content_host(console_url, instance, path: str) -> tuple[Client, dict[str, str], str]:  # noqa: F811
    """A browser logged in to the console (its client) and signed in on the instance's host by the
    hand-off: (the console client, the content host's cookie, the host)."""
    browser = Client()
    browser.force_login(instance.owner)
    session = {"sessionid": browser.cookies["sessionid"].value}
    host = content_host(instance.pk)
    start = httpx.get(f"{console_url}/open/?next={path}", cookies=session, timeout=30)
    redeemed = on_content_host(console_url, start.headers["location"], host)
    cookie = {"console_content": redeemed.cookies["console_content"]}
    assert on_content_host(console_url, path, host, cookies=cookie).status_code == 200
    return browser, cookie, host


def test_logging_out_of_the_console_signs_the_browser_out_of_the_instance_s_host(
    alice_instance,  # noqa: F811
    console_url,  # noqa: F811
    content_domain,  # noqa: F811
    user_server,  # noqa: F811
):
    port = port_declare(instance=alice_instance, port=user_server)
    browser, cookie, host = signed_in_on_content_host(console_url, alice_instance, port.path)
    assert browser.post("/accounts/logout/").status_code == 302
    assert on_content_host(console_url, port.path, host, cookies=cookie).status_code == 404


def test_a_password_change_signs_every_browser_out_of_the_instance_s_host(
    alice_instance,  # noqa: F811
    console_url,  # noqa: F811
    content_domain,  # noqa: F811
    user_server,  # noqa: F811
):
    port = port_declare(instance=alice_instance, port=user_server)
    _browser, cookie, host = signed_in_on_content_host(console_url, alice_instance, port.path)
    # Changed from another browser (or by a reset): this browser's console session is no longer valid.
    alice = alice_instance.owner
    alice.set_password("a-new-long-password-for-alice")
    alice.save()
    assert on_content_host(console_url, port.path, host, cookies=cookie).status_code == 404


def test_another_browser_s_log_out_leaves_this_one_signed_in(
    alice_instance,  # noqa: F811
    console_url,  # noqa: F811
    content_domain,  # noqa: F811
    user_server,  # noqa: F811
):
    port = port_declare(instance=alice_instance, port=user_server)
    _browser, cookie, host = signed_in_on_content_host(console_url, alice_instance, port.path)
    elsewhere = Client()
    elsewhere.force_login(alice_instance.owner)
    elsewhere.post("/accounts/logout/")
    assert on_content_host(console_url, port.path, host, cookies=cookie).status_code == 200
