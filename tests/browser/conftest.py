"""Browser tests: Playwright driving Debian's Chromium (/usr/bin/chromium) against pytest-django's live server.

Playwright may not download its own browsers here, so the launch points at the system Chromium and the
tests are skipped, saying why, where it is missing (``make test`` installs it: the browser-deps target).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

CHROMIUM = Path("/usr/bin/chromium")


def pytest_collection_modifyitems(config, items):
    if CHROMIUM.exists():
        return
    skip = pytest.mark.skip(reason=f"{CHROMIUM} does not exist: install Debian's chromium (make browser-deps)")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {
        **browser_type_launch_args,
        "executable_path": str(CHROMIUM),
        "args": [
            "--no-sandbox",
            "--headless",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ],
    }


@pytest.fixture
def screenshot_dir(tmp_path) -> Path:
    """Where the screenshots go: $BROWSER_SCREENSHOT_DIR to keep them (CI artefacts), else a temp dir."""
    path = Path(os.environ.get("BROWSER_SCREENSHOT_DIR") or tmp_path)
    path.mkdir(parents=True, exist_ok=True)
    return path


# pytest-playwright keeps Playwright (and so an asyncio loop in the test thread) for the whole session. Here it
# lives for one browser module only: while the loop runs, Django refuses ORM calls from this thread unless
# DJANGO_ALLOW_ASYNC_UNSAFE is set. It is safe here (the loop only drives the browser; the live server has its
# own thread), but the variable must not leak into the rest of the suite, where it would hide real mistakes
# and where `check --deploy` rightly refuses it.
@pytest.fixture(scope="module")
def playwright():
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as pw:
            yield pw
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(scope="module")
def browser_type(playwright, browser_name):
    return getattr(playwright, browser_name)


@pytest.fixture(scope="module")
def browser(browser_type, browser_type_launch_args):
    browser = browser_type.launch(**browser_type_launch_args)
    yield browser
    browser.close()


@pytest.fixture(scope="module")
def browser_context_args(playwright, device):
    # pytest-playwright's own is session-scoped and asks for `playwright`; this one follows it into the module.
    return dict(playwright.devices[device]) if device else {}


@pytest.fixture
def sign_in(live_server, settings):
    """``sign_in(page, user)``: the page's browser holds ``user``'s session (no log-in form to fill)."""
    from django.test import Client

    def _sign_in(page, user) -> None:
        client = Client()
        client.force_login(user)
        cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
        page.context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": live_server.url}])

    return _sign_in
