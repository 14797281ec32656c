"""In Chromium, end to end on the local backend (this host, the process engine): alice launches an instance,
writes a file from a JupyterLab cell, takes a snapshot from the instance page and watches it get ready,
changes the file, stops the instance, restores the snapshot (confirming), starts it again and reads the
old content back in JupyterLab. The instance page fits a 390 px phone without scrolling sideways."""

from __future__ import annotations

import threading
import time

import pytest
from playwright.sync_api import expect

from console.tests.conftest import session_cookie
from providers.local.tests.local_helpers import asgi_server
from tests.browser.test_local_backend_browser import _context, this_host_backend  # noqa: F401 (a fixture)
from tests.browser.test_save_as_image_browser import _launch_here

pytestmark = [pytest.mark.local, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NO_SIDEWAYS_SCROLL = "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
# What sticks out, when something does: the elements wider than the page, innermost last.
WIDE = """[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right >
    document.documentElement.clientWidth + 1).slice(-8).map(e => e.tagName + '#' + e.id + '.' + e.className)"""


class Worker(threading.Thread):
    """The Celery worker's poll of what boots or starts, in a thread of its own."""

    def __init__(self, user) -> None:
        super().__init__(daemon=True)
        self.user, self.done = user, threading.Event()

    def run(self) -> None:
        from django.db import connection

        from instances.models import Instance
        from instances.services import instance_sync

        try:
            while not self.done.is_set():
                busy = Instance.objects.filter(owner=self.user, status__in=("provisioning", "starting", "stopping"))
                for pk in busy.values_list("pk", flat=True):
                    instance_sync(instance_id=pk)
                time.sleep(0.2)
        finally:
            connection.close()


def _run_cell(page, code: str) -> str:
    """Run ``code`` in a new notebook of the instance's JupyterLab. Its workspace is reset first: a lab
    opened before reopens its last notebook instead of the launcher."""
    with page.context.expect_page() as opened:
        page.get_by_role("link", name="Open JupyterLab").click()
    lab = opened.value
    lab.wait_for_load_state()
    lab.goto(lab.url.split("?", 1)[0] + "?reset")
    lab.locator('.jp-LauncherCard[data-category="Notebook"]').first.click()
    lab.get_by_text("Python 3 (ipykernel) | Idle").wait_for()
    lab.locator(".jp-Notebook .jp-Cell .cm-content").first.click()
    lab.keyboard.type(code)
    lab.keyboard.press("Shift+Enter")
    output = lab.locator(".jp-OutputArea-output").first
    output.wait_for()
    text = output.inner_text().strip()
    lab.close()
    return text


def _badge(page):
    return page.locator("#instance-body h1 .badge")


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
            page = _context(browser, base_url, session_cookie(alice)["sessionid"]).new_page()
            page.goto(f"{base_url}/instances/launch/")
            _launch_here(page, "snap-me")
            assert _run_cell(page, "open('notes.txt', 'w').write('version one'); print(open('notes.txt').read())") == (
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

            assert _run_cell(page, "open('notes.txt', 'w').write('version two'); print(open('notes.txt').read())") == (
                "version two"
            )

            page.locator("#instance-body").get_by_role("button", name="Stop", exact=True).click()
            expect(_badge(page)).to_have_text("Stopped", timeout=60_000)
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
            expect(_badge(page)).to_have_text("Running", timeout=60_000)
            assert _run_cell(page, "print(open('notes.txt').read())") == "version one"
    finally:
        worker.done.set()
        worker.join(timeout=10)
