"""What the browser tests on the local backend share: a thread that plays the Celery worker's poll, a
browser context signed in with a session cookie, a launch on "This host" that waits for Running, and a
JupyterLab cell run from the instance page."""

from __future__ import annotations

import threading
import time

from playwright.sync_api import expect

# The statuses the worker's poll (``instance_sync``) moves on: a boot, a start and a stop under way.
UNDER_WAY = ("provisioning", "starting", "stopping")


class Worker(threading.Thread):
    """The Celery worker's poll, in a thread of its own (the test's thread runs Playwright's loop)."""

    def __init__(self, user) -> None:
        super().__init__(daemon=True)
        self.user, self.done = user, threading.Event()

    def run(self) -> None:
        from django.db import connection

        from instances.models import Instance
        from instances.services import instance_sync

        try:
            while not self.done.is_set():
                busy = Instance.objects.filter(owner=self.user, status__in=UNDER_WAY)
                for pk in busy.values_list("pk", flat=True):
                    instance_sync(instance_id=pk)
                time.sleep(0.2)
        finally:
            connection.close()


def browser_context(browser, base_url: str, cookie: str):
    """A new context of ``browser`` signed in with the session ``cookie``, waiting up to a minute."""
    context = browser.new_context()
    context.add_cookies([{"name": "sessionid", "value": cookie, "url": base_url}])
    context.set_default_timeout(60_000)
    return context


def status_badge(page):
    """The instance page's status badge."""
    return page.locator("#instance-body h1 .badge")


def launch_here(page, name: str) -> None:
    """On the launch page: "This host", the name, Launch, then wait for Running on the instance's page."""
    page.get_by_label("This host").check()
    page.locator("#launch-form input[name=name]").fill(name)
    page.locator("#launch-button").click()
    expect(status_badge(page)).to_have_text("Running", timeout=120_000)


def run_cell(page, code: str) -> str:
    """Run ``code`` in a new notebook of the instance's JupyterLab (opened from its page) and return the
    cell's output. The workspace is reset first: a lab opened before reopens its last notebook instead
    of the launcher."""
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
