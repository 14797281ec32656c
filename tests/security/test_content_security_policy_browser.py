"""The console's main pages, walked in Chromium under their Content-Security-Policy: each page carries
the policy, and nothing on it (a script, a style, htmx, the charts, the live status) is refused by it or
fails: the policy is strict and the pages still work."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.test import Client

from instances.catalogue import catalogue_seed
from instances.tests.conftest import backends, fund, running
from providers.local.tests.local_helpers import asgi_server

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
# Every page records what its policy refused, before any of its own scripts run.
LISTEN = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__violations.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber} ${e.sample}`);
});
"""
PAGES = [
    "/dashboard/",
    "/instances/",
    "/instances/launch/",
    "/instances/{instance}/",
    "/billing/",
    "/storage/",
    "/storage/{volume}/",
    "/account/",
]


@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} does not exist (make browser-deps)")
def test_the_main_pages_run_under_their_policy_without_a_violation(alice, settings):
    from playwright.sync_api import sync_playwright

    from storage.tests.conftest import make_volume

    settings.PROVISIONING_BACKENDS = backends()
    settings.CONSOLE_LIVE_FALLBACK_POLL_S = 3600  # the live status's fallback poll stays out of the walk
    catalogue_seed()
    fund(alice, 1_000_000)
    instance = running(alice, name="csp")
    volume = make_volume(alice)
    client = Client()
    client.force_login(alice)
    session = client.cookies[django_settings.SESSION_COOKIE_NAME].value
    problems: list[str] = []
    with asgi_server() as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            context = browser.new_context()
            context.add_cookies([{"name": django_settings.SESSION_COOKIE_NAME, "value": session, "url": url}])
            context.add_init_script(LISTEN)
            page = context.new_page()
            page.on("console", lambda m: m.type == "error" and problems.append(f"{page.url}: console: {m.text}"))
            page.on("pageerror", lambda e: problems.append(f"{page.url}: error: {e}"))
            for path in PAGES:
                path = path.format(instance=instance.pk, volume=volume.pk)
                response = page.goto(f"{url}{path}", wait_until="load")
                assert response is not None and response.status == 200, path
                policy = response.headers.get("content-security-policy", "")
                assert "script-src 'self'" in policy, (path, policy)
                page.wait_for_load_state("networkidle", timeout=30_000)
                assert page.evaluate("window.htmx && htmx.config.allowEval") is False, path
                problems.extend(f"{path}: violated: {v}" for v in page.evaluate("window.__violations"))

            # What inline handlers did, the console's script does: a form asks first (dismissed: nothing
            # happens), and choosing a language submits its form.
            page.goto(f"{url}/instances/{instance.pk}/")
            asked: list[str] = []
            page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
            page.locator("form[data-confirm] button.danger").first.click()
            page.wait_for_load_state("networkidle", timeout=30_000)
            assert asked and "Release this instance?" in asked[0]
            with page.expect_navigation(timeout=30_000):
                page.locator("#language-select").first.select_option("zh-hans")
            assert page.evaluate("document.documentElement.lang") == "zh-hans"
            problems.extend(f"handlers: violated: {v}" for v in page.evaluate("window.__violations"))
        finally:
            browser.close()
    assert not problems, "\n".join(problems)
    instance.refresh_from_db()
    assert instance.status == "running"  # the dismissed question released nothing
