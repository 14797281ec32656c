"""In Chromium, through the console's proxy: alice runs a notebook cell in her JupyterLab and sees VS Code's
workbench; charlie, opening the same URLs, gets 404."""

from __future__ import annotations

import shutil

import pytest

from console.tests.conftest import session_cookie

pytestmark = [pytest.mark.local, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _chromium(playwright):
    return playwright.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)


def _page(browser, world, cookie: str):
    context = browser.new_context()
    context.add_cookies([{"name": "sessionid", "value": cookie, "url": world.base_url}])
    page = context.new_page()
    page.set_default_timeout(60_000)
    return page


def test_the_owner_runs_a_cell_and_a_stranger_gets_404(proxy_world, alice, charlie):
    if not shutil.which("chromium"):
        pytest.skip("Debian's chromium is not installed (make browser-deps)")
    from playwright.sync_api import sync_playwright

    proxy_world.own(proxy_world.alice_key, alice)
    # Sessions first: the database is not touched once the browser's event loop runs.
    alice_cookie, charlie_cookie = session_cookie(alice)["sessionid"], session_cookie(charlie)["sessionid"]
    secret = proxy_world.runtime.upstream(proxy_world.alice_key, "lab").secret

    with sync_playwright() as playwright:
        browser = _chromium(playwright)
        try:
            page = _page(browser, proxy_world, alice_cookie)
            page.goto(proxy_world.url(proxy_world.alice_key, "lab/lab"))
            page.locator('.jp-LauncherCard[data-category="Notebook"]').first.click()
            # The kernel's WebSocket is up once the status bar says it is idle.
            page.get_by_text("Python 3 (ipykernel) | Idle").wait_for()
            page.locator(".jp-Notebook .jp-Cell .cm-content").first.click()
            page.keyboard.type("print(sum(range(10)) * 6)")
            page.keyboard.press("Shift+Enter")
            output = page.locator(".jp-OutputArea-output").first
            output.wait_for()
            assert output.inner_text().strip() == "270"
            assert secret not in page.url
            assert secret not in page.content()

            if "code" in proxy_world.runtime.services:
                page.goto(proxy_world.url(proxy_world.alice_key, "code/"))
                page.locator(".monaco-workbench").wait_for()
                assert "login" not in page.url

            stranger = _page(browser, proxy_world, charlie_cookie)
            assert stranger.goto(proxy_world.url(proxy_world.alice_key, "lab/lab")).status == 404
            assert stranger.goto(proxy_world.url(proxy_world.alice_key, "code/")).status == 404
        finally:
            browser.close()
