"""A new visitor signs up, verifies the e-mail, adds an SSH key and sees it listed; the phone layout works."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from playwright.sync_api import Page, expect

from accounts.models import SSHKey, User

pytestmark = pytest.mark.browser

EMAIL = "newcomer@example.com"
PASSWORD = "a long passphrase 42"


def fresh_ed25519_public_key() -> tuple[str, str]:
    """A new key's OpenSSH line and its fingerprint, computed here independently of the console's code."""
    line = (
        ed25519.Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    blob = base64.b64decode(line.split()[1])
    fingerprint = "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return f"{line} newcomer@laptop", fingerprint


def test_a_newcomer_signs_up_verifies_and_adds_an_ssh_key(live_server, page: Page, mailoutbox, screenshot_dir):
    page.set_default_timeout(15_000)
    page.goto(live_server.url + "/")
    page.locator("header").get_by_role("link", name="Sign up").click()
    expect(page.get_by_role("heading", name="Create your account")).to_be_visible()
    page.screenshot(path=str(screenshot_dir / "signup.png"), full_page=True)

    page.fill("input[name=email]", EMAIL)
    page.fill("input[name=password1]", PASSWORD)
    page.fill("input[name=password2]", PASSWORD)
    page.check("input[name=accept_terms]")
    page.get_by_role("button", name="Sign up").click()
    expect(page.get_by_role("heading", name="Check your inbox")).to_be_visible()

    assert len(mailoutbox) == 1
    message = mailoutbox[0]
    assert message.to == [EMAIL]
    link = re.search(r"https?://\S+/accounts/confirm-email/\S+/", message.body).group(0)
    page.goto(link)
    expect(page.get_by_role("heading", name="Confirm Email Address")).to_be_visible()
    page.get_by_role("button", name="Confirm").click()

    # Verified and logged in: the dashboard greets the newcomer with their next step.
    expect(page).to_have_url(re.compile(r"/dashboard/$"))
    expect(page.get_by_role("heading", name="Welcome, newcomer")).to_be_visible()
    page.screenshot(path=str(screenshot_dir / "dashboard.png"), full_page=True)

    page.get_by_role("link", name="Add an SSH key").click()
    expect(page).to_have_url(re.compile(r"/account/ssh-keys/$"))
    expect(page.get_by_text("No SSH keys yet")).to_be_visible()
    public_key, fingerprint = fresh_ed25519_public_key()
    page.fill("textarea[name=public_key]", public_key)
    page.fill("input[name=name]", "my laptop")
    page.get_by_role("button", name="Add key").click()

    row = page.locator("#ssh-key-list tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("my laptop")
    expect(row).to_contain_text("Ed25519")
    expect(row.locator("code.fingerprint")).to_have_text(fingerprint)
    page.screenshot(path=str(screenshot_dir / "ssh-keys.png"), full_page=True)

    user = User.objects.get(email=EMAIL)
    assert list(SSHKey.objects.filter(user=user).values_list("fingerprint", flat=True)) == [fingerprint]

    # A phone: the sidebar is a drawer, hidden until ☰ is tapped.
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(live_server.url + "/dashboard/")
    sidebar = page.locator("aside.sidebar")
    expect(sidebar).not_to_be_in_viewport()
    page.screenshot(path=str(screenshot_dir / "dashboard-phone.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, "the page scrolls sideways on a phone"
    page.get_by_label("Menu").click()
    # The drawer slides in (a CSS transition): wait until it is fully open.
    page.wait_for_function("() => document.querySelector('aside.sidebar').getBoundingClientRect().left >= 0")
    expect(sidebar).to_be_in_viewport(ratio=1)
    expect(sidebar.get_by_role("link", name="Instances")).to_be_visible()
    page.screenshot(path=str(screenshot_dir / "dashboard-phone-menu.png"))
    # Tapping beside the drawer closes it again.
    page.mouse.click(370, 400)
    page.wait_for_function("() => document.querySelector('aside.sidebar').getBoundingClientRect().right <= 0")
