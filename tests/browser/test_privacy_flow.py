"""Privacy in a browser: the terms accepted at sign-up and asked again after a new version; an export
downloaded and opened; an account deleted, its machine released and the ledger still balanced. Each new
page is looked at 1366 and 390 px wide."""

from __future__ import annotations

import json
import re
import zipfile
from datetime import timedelta

import pytest
from playwright.sync_api import Page, expect

from accounts.models import User
from accounts.tests.factories import DEFAULT_PASSWORD, UserFactory
from billing.services import ledger_check
from instances.catalogue import catalogue_seed
from instances.models import Instance
from instances.tests.conftest import backends, fund, running
from privacy import services
from privacy.models import Acceptance, DeletionRequest, DocumentVersion
from privacy.selectors import in_force_forget

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a long passphrase 42"
WIDTHS = (1366, 390)


def texts_in_force() -> None:
    """A transactional test starts with empty tables: the seeded first versions, made again."""
    for kind, title in (("terms", "Terms of service"), ("privacy", "Privacy policy")):
        DocumentVersion.objects.get_or_create(
            kind=kind,
            version=1,
            defaults={
                "title_en": title,
                "title_zh": title,
                "body_en": f"The {title.lower()}.",
                "body_zh": "文本。",
                "published_at": "2026-01-01T00:00:00Z",
            },
        )
    in_force_forget()


def looks_right(page: Page, screenshot_dir, name: str) -> None:
    """At each width: nothing wider than the window (no sideways scrolling), and a screenshot to look at."""
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"{name} is {overflow}px wider than a {width}px window"
        page.screenshot(path=str(screenshot_dir / f"{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1366, "height": 900})


def test_terms_are_accepted_at_sign_up_and_asked_again_after_a_new_version(
    live_server, page: Page, mailoutbox, screenshot_dir
):
    page.set_default_timeout(15_000)
    texts_in_force()
    page.goto(live_server.url + "/accounts/signup/")
    page.fill("input[name=email]", "newcomer@example.com")
    page.fill("input[name=password1]", PASSWORD)
    page.fill("input[name=password2]", PASSWORD)
    page.get_by_role("button", name="Sign up").click()
    expect(page.get_by_text("Accept the terms of service and the privacy policy to create an account.")).to_be_visible()
    assert not User.objects.filter(email="newcomer@example.com").exists()
    expect(page.get_by_role("link", name="terms of service", exact=True)).to_have_attribute("href", "/legal/terms/")
    expect(page.get_by_role("link", name="privacy policy", exact=True)).to_have_attribute("href", "/legal/privacy/")
    looks_right(page, screenshot_dir, "signup-terms")
    page.fill("input[name=password1]", PASSWORD)  # a refused form comes back without the passwords
    page.fill("input[name=password2]", PASSWORD)
    page.check("input[name=accept_terms]")
    page.get_by_role("button", name="Sign up").click()
    expect(page.get_by_role("heading", name="Check your inbox")).to_be_visible()
    link = re.search(r"https?://\S+/accounts/confirm-email/\S+/", mailoutbox[0].body).group(0)
    page.goto(link)
    page.get_by_role("button", name="Confirm").click()
    expect(page).to_have_url(re.compile(r"/dashboard/$"))
    user = User.objects.get(email="newcomer@example.com")
    assert sorted(Acceptance.objects.filter(user=user).values_list("document__kind", flat=True)) == ["privacy", "terms"]

    # Staff publish a second version of the terms: the next page asks for it first.
    draft = services.document_draft_create(kind="terms", actor=None)
    services.document_draft_update(version=draft, body_en="Version two.", changes_en="Refunds explained.")
    services.document_publish(version=draft, actor=None)
    page.goto(live_server.url + "/instances/")
    expect(page).to_have_url(re.compile(r"/legal/accept/\?next=%2Finstances%2F$"))
    expect(page.get_by_text("Refunds explained.")).to_be_visible()
    looks_right(page, screenshot_dir, "accept")
    page.get_by_role("button", name="Accept and continue").click()
    expect(page.get_by_text("Tick the box to accept")).to_be_visible()
    page.check("input[name=accept]")
    page.get_by_role("button", name="Accept and continue").click()
    expect(page).to_have_url(re.compile(r"/instances/$"))
    assert Acceptance.objects.filter(user=user, document=draft).exists()

    page.goto(live_server.url + "/legal/terms/")
    expect(page.get_by_text("Version two.")).to_be_visible()
    looks_right(page, screenshot_dir, "terms")


def test_an_export_is_downloaded_and_holds_the_account(live_server, page: Page, sign_in, screenshot_dir):
    page.set_default_timeout(15_000)
    texts_in_force()
    alice = UserFactory(email="alice@example.com", display_name="Alice")
    catalogue_seed()
    fund(alice, 50_00)
    sign_in(page, alice)
    page.goto(live_server.url + "/account/data/")
    expect(page.get_by_text("No export yet")).to_be_visible()
    page.get_by_role("button", name="Export my data").click()
    download_link = page.get_by_role("link", name="Download")
    expect(download_link).to_be_visible()  # tasks run eagerly here; a worker's build shows up by polling
    looks_right(page, screenshot_dir, "your-data")
    with page.expect_download() as info:
        download_link.click()
    archive = zipfile.ZipFile(info.value.path())
    assert {"account.json", "instances.csv", "instance_events.csv", "ledger_entries.csv", "invoices.csv"} <= set(
        archive.namelist()
    )
    assert json.loads(archive.read("account.json"))["email"] == "alice@example.com"
    assert "5000" in archive.read("ledger_entries.csv").decode("utf-8-sig")


def test_an_account_is_deleted_its_machine_released_and_the_ledger_balanced(
    live_server, page: Page, browser, sign_in, settings, screenshot_dir
):
    page.set_default_timeout(15_000)
    settings.PROVISIONING_BACKENDS = backends()
    settings.INSTANCES_REDRIVE_AFTER_S = 0
    texts_in_force()
    catalogue_seed()
    alice = UserFactory(email="alice@example.com", display_name="Alice")
    staff = UserFactory(email="staff@example.com", is_staff=True, is_superuser=True)
    fund(alice, 1_000_00)
    instance = running(alice, name="trainer")
    assert instance.status == Instance.Status.RUNNING

    sign_in(page, alice)
    page.goto(live_server.url + "/account/data/")
    page.get_by_role("link", name="Delete my account…").click()
    # allauth asks for the password again before anything so lasting.
    expect(page).to_have_url(re.compile(r"/accounts/reauthenticate/"))
    page.fill("input[name=password]", DEFAULT_PASSWORD)
    page.get_by_role("button", name="Confirm").click()
    expect(page).to_have_url(re.compile(r"/account/data/delete/$"))
    looks_right(page, screenshot_dir, "delete-account")
    page.check("input[name=confirm]")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete my account").click()
    expect(page.locator(".alert", has_text="Your account will be deleted on")).to_be_visible()
    expect(page.get_by_role("button", name="Cancel the deletion")).to_be_visible()
    request = DeletionRequest.objects.get(user=alice)
    assert request.status == DeletionRequest.Status.SCHEDULED

    # The warning period passes: the beat's pass releases the machine, the next erases the person.
    services.deletions_due(now=request.due_at + timedelta(seconds=1))
    services.deletions_due(now=request.due_at + timedelta(seconds=2))
    request.refresh_from_db()
    assert request.status == DeletionRequest.Status.COMPLETED, request.summary
    instance.refresh_from_db()
    assert instance.status == Instance.Status.RELEASED
    alice.refresh_from_db()
    assert alice.email.endswith("@deleted.invalid") and not alice.is_active
    check = ledger_check()
    assert check.ok, check.problems

    page.goto(live_server.url + "/account/data/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))  # the session ended with the account

    staff_page = browser.new_context().new_page()
    staff_page.set_default_timeout(15_000)
    sign_in(staff_page, staff)
    staff_page.goto(live_server.url + "/staff/privacy/")
    expect(staff_page.get_by_text("No account is waiting to be deleted.")).to_be_visible()
    expect(staff_page.locator("table .badge", has_text="Completed")).to_be_visible()
    assert "alice@example.com" not in staff_page.content()
    looks_right(staff_page, screenshot_dir, "staff-privacy")
