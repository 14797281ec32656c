"""In Chromium, under the console's Content-Security-Policy, on a laptop and on a phone: a person sets up
an authenticator app from their account's pages and signs in with its code; another adds a passkey
(Chromium's virtual authenticator) and signs in with it alone. allauth's passkey script, served as a
static file, runs without a policy violation, and no page scrolls sideways."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from accounts.models import SecurityEvent
from accounts.tests.factories import DEFAULT_PASSWORD, UserFactory, totp_code

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking", "--no-first-run"]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} does not exist (make browser-deps)"),
]

# Every page records what its policy refused, before any of its own scripts run.
LISTEN = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__violations.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`);
});
"""


@pytest.fixture
def screenshot_dir(tmp_path) -> Path:
    """Where the screenshots go: $BROWSER_SCREENSHOT_DIR to keep them (CI artefacts), else a temp dir."""
    path = Path(os.environ.get("BROWSER_SCREENSHOT_DIR") or tmp_path)
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def watched(monkeypatch):
    """A Chromium page, with every policy violation, script error and console error it meets collected."""
    # Playwright's loop runs in this thread while the test reads the database; the live server has its own.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            context = browser.new_context()
            context.add_init_script(LISTEN)
            page = context.new_page()
            problems: list[str] = []
            page.on("console", lambda m: m.type == "error" and problems.append(f"{page.url}: console: {m.text}"))
            page.on("pageerror", lambda e: problems.append(f"{page.url}: error: {e}"))
            page.set_default_timeout(15_000)
            page.problems = problems
            yield page
        finally:
            browser.close()


def check(page: Page, width: int, shots, name: str) -> None:
    """No violation so far, no sideways scrolling; a screenshot for people to look at."""
    page.problems.extend(f"{page.url}: violated: {v}" for v in page.evaluate("window.__violations || []"))
    assert page.problems == []
    assert page.evaluate("document.documentElement.scrollWidth") <= width, f"{name} scrolls sideways"
    page.screenshot(path=str(shots / f"2fa-{name}-{width}.png"), full_page=True)


def log_in(page: Page, base: str, email: str) -> None:
    page.goto(base + "/accounts/login/")
    page.fill("input[name=login]", email)
    page.fill("input[name=password]", DEFAULT_PASSWORD)
    page.get_by_role("button", name="Log in", exact=True).click()


def log_out(page: Page) -> None:
    page.locator("details.account-menu summary").click()
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/accounts/login/"))


def confirm_password(page: Page) -> None:
    expect(page.get_by_role("heading", name="Confirm Access")).to_be_visible()
    page.fill("input[name=password]", DEFAULT_PASSWORD)
    page.get_by_role("button", name="Confirm").click()


@pytest.mark.parametrize("width", [1366, 390])
def test_a_person_sets_up_an_authenticator_app_and_signs_in_with_its_code(
    live_server, watched: Page, screenshot_dir, width
):
    page = watched
    alice = UserFactory(email="alice@example.com")
    page.set_viewport_size({"width": width, "height": 844})
    log_in(page, live_server.url, alice.email)
    expect(page).to_have_url(re.compile(r"/dashboard/$"))

    page.goto(live_server.url + "/account/")
    page.locator("nav.tabs").get_by_role("link", name="Two-factor sign-in").click()
    expect(page.get_by_role("heading", name="Two-factor sign-in")).to_be_visible()
    check(page, width, screenshot_dir, "index-off")
    page.locator("#mfa-totp").get_by_role("link", name="Set up").click()
    expect(page.get_by_role("heading", name="Confirm Access")).to_be_visible()
    check(page, width, screenshot_dir, "confirm-password")
    confirm_password(page)

    expect(page.get_by_role("heading", name="Set up an authenticator app")).to_be_visible()
    expect(page.locator(".mfa-qr img")).to_be_visible()
    check(page, width, screenshot_dir, "activate")
    secret = page.locator("#totp-secret").inner_text().strip()
    page.fill("input[name=code]", totp_code(secret))
    page.get_by_role("button", name="Turn on").click()

    expect(page.get_by_role("heading", name="Recovery codes")).to_be_visible()
    expect(page.locator("#recovery-codes li")).to_have_count(10)
    check(page, width, screenshot_dir, "recovery-codes")
    page.get_by_role("link", name="Done").click()
    expect(page.locator("#mfa-totp .badge")).to_have_text("On")
    check(page, width, screenshot_dir, "index-on")

    log_out(page)
    check(page, width, screenshot_dir, "login")  # with its passkey button
    log_in(page, live_server.url, alice.email)
    expect(page.get_by_role("heading", name="Two-factor sign-in")).to_be_visible()
    check(page, width, screenshot_dir, "authenticate")
    # The code shown at enrolment is spent; the app's next one is already good (one period either side).
    page.fill("input[name=code]", totp_code(secret, step=1))
    page.get_by_role("button", name="Verify").click()
    expect(page).to_have_url(re.compile(r"/dashboard/$"))

    page.goto(live_server.url + "/account/security/")
    expect(page.locator("#security-log")).to_contain_text("Second factor used")
    check(page, width, screenshot_dir, "security-log")
    assert SecurityEvent.objects.filter(user=alice, action=SecurityEvent.Action.SECOND_FACTOR_USED).count() == 1


def test_a_person_adds_a_passkey_and_signs_in_with_it_alone(live_server, watched: Page, screenshot_dir):
    page = watched
    bob = UserFactory(email="bob@example.com")
    cdp = page.context.new_cdp_session(page)
    cdp.send("WebAuthn.enable")
    cdp.send(
        "WebAuthn.addVirtualAuthenticator",
        {
            "options": {
                "protocol": "ctap2",
                "transport": "internal",
                "hasResidentKey": True,
                "hasUserVerification": True,
                "isUserVerified": True,
                "automaticPresenceSimulation": True,
            }
        },
    )
    page.set_viewport_size({"width": 1366, "height": 844})
    # WebAuthn wants a host name (an IP address is no relying party): the live server's is "localhost".
    assert "://localhost:" in live_server.url
    log_in(page, live_server.url, bob.email)
    page.goto(live_server.url + "/accounts/2fa/")
    page.locator("#mfa-webauthn").get_by_role("link", name="Add").click()
    confirm_password(page)
    expect(page.get_by_role("heading", name="Add a passkey or security key")).to_be_visible()
    check(page, 1366, screenshot_dir, "passkey-add")
    page.fill("input[name=name]", "Laptop")
    page.check("input[name=passwordless]")
    page.get_by_role("button", name="Add", exact=True).click()
    expect(page.get_by_role("heading", name="Recovery codes")).to_be_visible()

    # After the password, the second step offers the passkey.
    log_out(page)
    log_in(page, live_server.url, bob.email)
    expect(page.get_by_role("heading", name="Two-factor sign-in")).to_be_visible()
    check(page, 1366, screenshot_dir, "passkey-second-step")
    page.get_by_role("button", name="Use a passkey or security key").click()
    expect(page).to_have_url(re.compile(r"/dashboard/$"))

    # And alone, from the log-in page.
    log_out(page)
    page.get_by_role("button", name="Log in with a passkey").click()
    expect(page).to_have_url(re.compile(r"/dashboard/$"))
    check(page, 1366, screenshot_dir, "passkey-signed-in")
    used = SecurityEvent.objects.filter(user=bob, action=SecurityEvent.Action.SECOND_FACTOR_USED).order_by("id")
    assert [event.details for event in used] == [
        {"method": "webauthn", "name": "Laptop"},
        {"method": "webauthn", "name": "Laptop", "passwordless": True},
    ]
