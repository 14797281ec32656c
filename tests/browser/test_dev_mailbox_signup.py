"""In development a newcomer signs up, follows "Open the mailbox" from "Check your inbox", clicks the
verification link there and lands verified, on a laptop and on a phone."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from console import mail

pytestmark = pytest.mark.browser


@pytest.fixture
def development(settings, tmp_path):
    settings.CONSOLE_ENV = "development"
    settings.EMAIL_BACKEND = mail.BACKEND
    settings.CONSOLE_DEV_MAILBOX_DIR = tmp_path / "mail"


@pytest.mark.parametrize("width", [1366, 390])
def test_a_newcomer_verifies_through_the_development_mailbox(
    live_server, page: Page, development, screenshot_dir, width
):
    page.set_default_timeout(15_000)
    page.set_viewport_size({"width": width, "height": 844})
    page.goto(live_server.url + "/accounts/signup/")
    page.fill("input[name=email]", "newcomer@example.com")
    page.fill("input[name=password1]", "a long passphrase 42")
    page.fill("input[name=password2]", "a long passphrase 42")
    page.check("input[name=accept_terms]")
    page.get_by_role("button", name="Sign up").click()
    expect(page.get_by_role("heading", name="Check your inbox")).to_be_visible()
    page.screenshot(path=str(screenshot_dir / f"check-inbox-{width}.png"), full_page=True)

    page.get_by_role("link", name="Open the mailbox").click()
    expect(page.get_by_role("heading", name="Development mailbox")).to_be_visible()
    page.screenshot(path=str(screenshot_dir / f"mailbox-{width}.png"), full_page=True)
    page.locator("#mailbox tbody tr").first.get_by_role("link").click()

    link = page.locator(".mail-links a").first
    expect(link).to_have_attribute("href", re.compile(r"^http://localhost:\d+/accounts/confirm-email/[^/\s]+/$"))
    assert page.evaluate("document.documentElement.scrollWidth") <= width, "the message scrolls sideways"
    page.screenshot(path=str(screenshot_dir / f"mail-{width}.png"), full_page=True)
    link.click()
    page.get_by_role("button", name="Confirm").click()
    expect(page).to_have_url(re.compile(r"/dashboard/$"))
