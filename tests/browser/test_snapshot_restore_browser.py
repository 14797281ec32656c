"""In Chromium, end to end on the local backend (this host, the process engine): alice launches an instance,
writes a file from a JupyterLab cell, takes a snapshot from the instance page and watches it get ready,
changes the file, stops the instance, restores the snapshot (confirming), starts it again and reads the
old content back in JupyterLab. The instance page fits a 390 px phone without scrolling sideways."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from console.tests.conftest import session_cookie
from providers.local.tests.local_helpers import asgi_server
from tests.browser.local_flow import Worker, browser_context, launch_here, run_cell, status_badge
from tests.browser.test_local_backend_browser import this_host_backend  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.local, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NO_SIDEWAYS_SCROLL = "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
# What sticks out, when something does: the elements wider than the page, innermost last.
WIDE = """[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right >
    document.documentElement.clientWidth + 1).slice(-8).map(e => e.tagName + '#' + e.id + '.' + e.className)"""


def test_snapshot_change_stop_restore_start_and_read_the_old_content(
    this_host_backend,  # noqa: F811
    browser,
    screenshot_dir,
):
    from accounts.tests.factories import UserFactory
    from instances.tests.conftest import fund

    alice = UserFactory(email="alice@example.com")
    fund(alice, 1_000_000)
    worker = Worker(alice)
    worker.start()
    try:
        with asgi_server() as base_url:
            page = browser_context(browser, base_url, session_cookie(alice)["sessionid"]).new_page()
            page.goto(f"{base_url}/instances/launch/")
            launch_here(page, "snap-me")
            assert run_cell(page, "open('notes.txt', 'w').write('version one'); print(open('notes.txt').read())") == (
                "version one"
            )

            page.reload()
            card = page.locator("#snapshots")
            expect(card).to_contain_text("/home/user")  # what is in a snapshot, said before taking one
            expect(card).to_contain_text("No snapshots yet")
            card.get_by_label("Snapshot name").fill("before-edit")
            card.get_by_role("button", name="Take a snapshot").click()
            row = page.locator("#snapshot-list li", has_text="before-edit")
            expect(row.locator("[data-snapshot-status]")).to_have_text("Ready", timeout=60_000)
            expect(row.get_by_role("button", name="Restore")).to_be_disabled()  # running: stop first
            page.screenshot(path=str(screenshot_dir / "snapshot-ready.png"), full_page=True)

            assert run_cell(page, "open('notes.txt', 'w').write('version two'); print(open('notes.txt').read())") == (
                "version two"
            )

            page.locator("#instance-body").get_by_role("button", name="Stop", exact=True).click()
            expect(status_badge(page)).to_have_text("Stopped", timeout=60_000)
            page.reload()
            row = page.locator("#snapshot-list li", has_text="before-edit")
            page.once("dialog", lambda dialog: dialog.accept())  # "what was written since … is lost"
            row.get_by_role("button", name="Restore").click()
            expect(page.locator("#snapshot-list li", has_text="before-edit")).to_contain_text(
                "restored", timeout=60_000
            )

            page.set_viewport_size({"width": 390, "height": 844})
            for _ in range(50):  # the layout settles after the resize (no wait_for_function: the CSP has no eval)
                if page.evaluate(NO_SIDEWAYS_SCROLL):
                    break
                page.wait_for_timeout(100)
            else:
                pytest.fail(f"the instance page scrolls sideways at 390 px: {page.evaluate(WIDE)}")
            page.screenshot(path=str(screenshot_dir / "snapshot-restored-390.png"), full_page=True)
            page.set_viewport_size({"width": 1366, "height": 768})

            page.locator("#instance-body").get_by_role("button", name="Start", exact=True).click()
            expect(status_badge(page)).to_have_text("Running", timeout=60_000)
            assert run_cell(page, "print(open('notes.txt').read())") == "version one"
    finally:
        worker.done.set()
        worker.join(timeout=10)
