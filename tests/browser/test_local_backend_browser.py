"""In Chromium, end to end on the local backend: alice launches an instance on "This host" from the launch
page, watches it come up, opens JupyterLab from the instance page and runs a cell, opens VS Code and sees
its workbench; charlie, opening the same URLs, gets 404 over HTTP and WebSocket."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from console.hooks import proxy_target
from console.tests.conftest import session_cookie
from console.tests.test_proxy_websocket import _refusal
from instances.proxy_targets import instance_proxy_target
from providers.local.tests.local_helpers import asgi_server, local_backends
from tests.browser.local_flow import Worker, browser_context

pytestmark = [pytest.mark.local, pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def this_host_backend(settings, tmp_path, hooks_override):
    from instances.catalogue import catalogue_seed
    from providers import get_backend

    settings.PROVISIONING_BACKENDS = local_backends(tmp_path / "instances", services=("lab", "code"))
    # The console's resolver, whatever a session-wide fixture (console/tests' proxy_world) set.
    hooks_override(proxy_target, instance_proxy_target)
    backend = get_backend("local")
    missing = backend.runtime.missing_components()
    if missing:
        pytest.skip("; ".join(missing.values()))
    catalogue_seed()
    yield backend
    for key in backend.runtime.instance_keys():
        backend.runtime.destroy(key)


def test_launch_on_this_host_then_jupyterlab_and_vs_code_for_the_owner_only(this_host_backend, browser, screenshot_dir):
    from accounts.tests.factories import UserFactory
    from instances.tests.conftest import fund

    alice, charlie = UserFactory(email="alice@example.com"), UserFactory(email="charlie@example.com")
    fund(alice, 1_000_000)
    alice_cookie, charlie_cookie = session_cookie(alice)["sessionid"], session_cookie(charlie)["sessionid"]
    worker = Worker(alice)
    worker.start()
    try:
        with asgi_server() as base_url:
            page = browser_context(browser, base_url, alice_cookie).new_page()
            page.goto(f"{base_url}/instances/launch/")
            page.get_by_label("This host").check()
            page.locator("#launch-form input[name=name]").fill("on-this-host")
            page.locator("#launch-button").click()
            expect(page.locator("#instance-body h1 .badge")).to_have_text("Running", timeout=60_000)
            instance_url = page.url
            page.screenshot(path=str(screenshot_dir / "local-instance-running.png"), full_page=True)

            with page.context.expect_page() as opened:
                page.get_by_role("link", name="Open JupyterLab").click()
            lab = opened.value
            lab.locator('.jp-LauncherCard[data-category="Notebook"]').first.click()
            lab.get_by_text("Python 3 (ipykernel) | Idle").wait_for()
            lab.locator(".jp-Notebook .jp-Cell .cm-content").first.click()
            lab.keyboard.type("print(sum(range(10)) * 6)")
            lab.keyboard.press("Shift+Enter")
            output = lab.locator(".jp-OutputArea-output").first
            output.wait_for()
            assert output.inner_text().strip() == "270"
            lab_url = lab.url
            instance_id = instance_url.rstrip("/").rsplit("/", 1)[1]
            secret = this_host_backend.runtime.upstream(instance_id, "lab").secret
            assert secret not in lab_url and secret not in lab.content()  # the server's token stays with the proxy

            with page.context.expect_page() as opened:
                page.get_by_role("link", name="Open VS Code").click()
            code = opened.value
            code.locator(".monaco-workbench").wait_for()
            code_url = code.url
            assert "/code/" in code_url and "login" not in code_url

            stranger = browser_context(browser, base_url, charlie_cookie).new_page()
            for url in (instance_url, lab_url, code_url):
                assert stranger.goto(url).status == 404, url
            kernels = httpx.get(f"{base_url}/i/{instance_id}/lab/api/kernels", cookies={"sessionid": alice_cookie})
            channels = (
                f"{base_url.replace('http', 'ws')}/i/{instance_id}/lab/api/kernels/{kernels.json()[0]['id']}/channels"
            )
            assert _refusal(channels, origin=base_url, cookie=charlie_cookie) == 404
    finally:
        worker.done.set()
        worker.join(timeout=10)
