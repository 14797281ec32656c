"""Identity in Chromium at 1366 px and 390 px: signing up by mobile number with the development texts
inbox's code, verifying a real name with the test provider, and a number that brings no second trial."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from billing.selectors import balance_get
from identity.models import PhoneNumber, RealNameVerification

pytestmark = pytest.mark.browser
WIDTHS = [(1366, 800), (390, 844)]


@pytest.fixture
def texts_inbox(settings, tmp_path):
    settings.CONSOLE_ENV = "development"
    settings.IDENTITY_SMS_SENDER = {"BACKEND": "identity.sms.dev.DevTextsSender", "OPTIONS": {}}
    settings.IDENTITY_PHONE_LOGIN = True
    settings.IDENTITY_DEV_TEXTS_DIR = tmp_path / "texts"
    settings.IDENTITY_SMS_RESEND_S = 0  # several numbers and people in one test, seconds apart
    settings.IDENTITY_REAL_NAME_PROVIDER = {"BACKEND": "identity.realname.test.TestRealNameProvider", "OPTIONS": {}}


def _fits(page: Page, width: int, name: str, screenshot_dir) -> None:
    page.screenshot(path=str(screenshot_dir / f"{name}-{width}.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= width, f"{name} scrolls sideways at {width} px"


def _code_for(page: Page, live_server, number: str) -> str:
    """The newest code texted to ``number``, read from the development texts inbox in another tab."""
    inbox = page.context.new_page()
    inbox.goto(live_server.url + "/dev/texts/")
    code = inbox.locator("#texts-inbox tbody tr", has_text=number).first.locator(".sms-code").inner_text()
    inbox.close()
    return code


@pytest.mark.parametrize("width,height", WIDTHS)
def test_a_newcomer_signs_up_by_mobile_number(live_server, page: Page, texts_inbox, screenshot_dir, width, height):
    page.set_default_timeout(15_000)
    page.set_viewport_size({"width": width, "height": height})
    page.goto(live_server.url + "/accounts/login/")
    page.get_by_role("link", name="Continue with a mobile number").click()
    expect(page.get_by_role("heading", name="Continue with a mobile number")).to_be_visible()
    page.fill("input[name=number]", "138 0013 8000")
    _fits(page, width, "phone-login", screenshot_dir)
    page.get_by_role("button", name="Text me a code").click()
    expect(page.get_by_text("138****8000")).to_be_visible()
    expect(page.get_by_role("link", name="development texts inbox")).to_be_visible()
    _fits(page, width, "phone-code", screenshot_dir)

    inbox = page.context.new_page()
    inbox.set_viewport_size({"width": width, "height": height})
    inbox.goto(live_server.url + "/dev/texts/")
    expect(inbox.get_by_role("heading", name="Development texts inbox")).to_be_visible()
    _fits(inbox, width, "texts-inbox", screenshot_dir)
    inbox.close()

    page.fill("input[name=code]", _code_for(page, live_server, "+8613800138000"))
    page.check("input[name=accept_terms]")
    page.get_by_role("button", name="Verify and continue").click()
    expect(page).to_have_url(re.compile(r"/dashboard/$"))
    assert PhoneNumber.objects.get().number == "+8613800138000"
    _fits(page, width, "phone-dashboard", screenshot_dir)


@pytest.mark.parametrize("width,height", WIDTHS)
def test_alice_verifies_her_real_name(
    live_server, page: Page, alice, sign_in, texts_inbox, screenshot_dir, width, height
):
    page.set_default_timeout(15_000)
    page.set_viewport_size({"width": width, "height": height})
    sign_in(page, alice)
    page.goto(live_server.url + "/account/identity/")
    expect(page.get_by_role("heading", name="Mobile number and real name")).to_be_visible()
    _fits(page, width, "identity-settings", screenshot_dir)
    form = page.locator("#real-name-individual")
    form.locator("input[name=name]").fill("张小三")
    form.locator("input[name=id_number]").fill("440308199003071236")  # one digit off
    form.get_by_role("button", name="Verify").click()
    expect(page.get_by_text("Enter a valid 18-character resident ID number.")).to_be_visible()
    _fits(page, width, "identity-settings-error", screenshot_dir)
    form = page.locator("#real-name-individual")
    form.locator("input[name=id_number]").fill("440308199003071235")
    form.get_by_role("button", name="Verify").click()
    expect(page.locator("#real-name-verified")).to_contain_text("张*三")
    assert RealNameVerification.objects.get(user=alice).status == "verified"
    _fits(page, width, "identity-verified", screenshot_dir)


@pytest.mark.parametrize("width,height", WIDTHS)
def test_a_second_account_with_the_same_number_gets_no_second_trial(
    live_server, page: Page, browser, alice, bob, sign_in, texts_inbox, settings, screenshot_dir, width, height
):
    settings.IDENTITY_TRIAL_REQUIRES = "phone"
    page.set_default_timeout(15_000)
    page.set_viewport_size({"width": width, "height": height})

    def verify_number(page: Page, number: str) -> None:
        page.goto(live_server.url + "/account/identity/")
        page.locator("#phone-change input[name=number]").fill(number)
        page.locator("#phone-change button[type=submit]").click()
        page.locator("#phone-change input[name=code]").fill(_code_for(page, live_server, "+86" + number))
        page.get_by_role("button", name="Verify number").click()
        expect(page.get_by_text("Your mobile number is verified.")).to_be_visible()

    sign_in(page, alice)
    page.goto(live_server.url + "/dashboard/")
    expect(page.get_by_text("Verify a mobile number in your account settings")).to_be_visible()
    verify_number(page, "13800138000")
    page.goto(live_server.url + "/dashboard/")
    page.get_by_role("button", name="Claim trial credit").click()
    expect(page.get_by_text("trial credit of ¥10.00 is ready")).to_be_visible()
    verify_number(page, "13900139000")  # alice moves to a new number; the old one is free

    other = browser.new_context(viewport={"width": width, "height": height})
    bob_page = other.new_page()
    bob_page.set_default_timeout(15_000)
    sign_in(bob_page, bob)
    verify_number(bob_page, "13800138000")
    bob_page.goto(live_server.url + "/dashboard/")
    expect(bob_page.get_by_text("already given to this mobile number")).to_be_visible()  # the step says why
    expect(bob_page.get_by_role("button", name="Claim trial credit")).to_have_count(0)
    _fits(bob_page, width, "no-second-trial", screenshot_dir)
    other.close()
    assert balance_get(user=alice).trial == 1000 and balance_get(user=bob).trial == 0


@pytest.mark.parametrize("width,height", WIDTHS)
def test_an_organisation_is_verified_by_staff(
    live_server,
    page: Page,
    browser,
    alice,
    staff,
    sign_in,
    texts_inbox,
    settings,
    tmp_path,
    screenshot_dir,
    width,
    height,
):
    settings.IDENTITY_DOCUMENTS_DIR = tmp_path / "documents"
    licence = tmp_path / "licence.pdf"
    licence.write_bytes(b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n")
    page.set_default_timeout(15_000)
    page.set_viewport_size({"width": width, "height": height})
    sign_in(page, alice)
    page.goto(live_server.url + "/account/identity/")
    form = page.locator("#real-name-organisation")
    form.locator("input[name=company_name]").fill("Example Technology Co., Ltd.")
    form.locator("input[name=credit_code]").fill("91350100M000100Y43")
    form.locator("input[name=document]").set_input_files(str(licence))
    form.get_by_role("button", name="Send for review").click()
    expect(page.get_by_text("staff are reviewing the business licence")).to_be_visible()

    other = browser.new_context(viewport={"width": width, "height": height})
    staff_page = other.new_page()
    staff_page.set_default_timeout(15_000)
    sign_in(staff_page, staff)
    staff_page.goto(live_server.url + "/staff/identity/")
    expect(staff_page.get_by_text("91350100M000100Y43")).to_be_visible()
    _fits(staff_page, width, "staff-real-names", screenshot_dir)
    staff_page.get_by_role("button", name="Approve").click()
    expect(staff_page.get_by_text("Decision saved.")).to_be_visible()
    _fits(staff_page, width, "staff-real-names-decided", screenshot_dir)
    other.close()

    page.reload()
    expect(page.locator("#real-name-verified")).to_contain_text("Example Technology Co., Ltd.")
    assert RealNameVerification.objects.get(user=alice).status == "verified"
