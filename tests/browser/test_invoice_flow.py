"""The invoice flow in a browser: alice tops up, asks for a company invoice; staff attach the PDF; alice
downloads it from Billing → Invoices."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from accounts.tests.factories import UserFactory
from invoices.models import InvoiceRequest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PDF = b"%PDF-1.7\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
TAX_NUMBER = "91110108MA01ABCDE"  # + its check character, computed below as GB 32100-2015 says
ALPHABET = "0123456789ABCDEFGHJKLMNPQRTUWXY"
WEIGHTS = (1, 3, 9, 27, 19, 26, 16, 17, 20, 29, 25, 13, 8, 24, 10, 30, 28)


def uscc(body: str) -> str:
    total = sum(ALPHABET.index(c) * w for c, w in zip(body, WEIGHTS, strict=True))
    return body + ALPHABET[(31 - total % 31) % 31]


def test_a_user_asks_for_an_invoice_staff_issue_it_and_the_user_downloads_it(
    live_server, page: Page, browser, sign_in, tmp_path, screenshot_dir
):
    page.set_default_timeout(15_000)
    alice = UserFactory(email="alice@example.com", display_name="Alice")
    staff = UserFactory(email="staff@example.com", is_staff=True, is_superuser=True)
    sign_in(page, alice)

    # Top up ¥50 through the simulated checkout.
    page.goto(live_server.url + "/billing/")
    page.get_by_role("button", name="¥50.00").click()
    page.get_by_role("button", name="Approve payment").click()
    expect(page.get_by_text("was added to your paid balance")).to_be_visible()

    # Ask for a company invoice of it.
    page.goto(live_server.url + "/billing/")
    page.get_by_role("link", name="Invoices").first.click()
    expect(page).to_have_url(re.compile(r"/billing/invoices/$"))
    page.fill("input[name=amount]", "50")
    page.check("input[name=title_type][value=company]")
    page.fill("input[name=title]", "Example Technology Ltd")
    page.fill("input[name=tax_number]", uscc(TAX_NUMBER))
    page.get_by_role("button", name="Request invoice").click()
    expect(page.get_by_text("Invoice request #")).to_be_visible()
    expect(page.locator("table .badge", has_text="Requested")).to_be_visible()
    page.screenshot(path=str(screenshot_dir / "invoice-requested.png"), full_page=True)

    # Staff attach the PDF in another browser session.
    staff_page = browser.new_context().new_page()
    staff_page.set_default_timeout(15_000)
    sign_in(staff_page, staff)
    staff_page.goto(live_server.url + "/staff/invoices/")
    expect(staff_page.get_by_text("Example Technology Ltd")).to_be_visible()
    pdf_file = tmp_path / "invoice.pdf"
    pdf_file.write_bytes(PDF)
    staff_page.fill("input[name=invoice_number]", "26110000000012345678")
    staff_page.set_input_files("input[name=pdf]", str(pdf_file))
    staff_page.get_by_role("button", name="Mark issued").click()
    expect(staff_page.get_by_text("was decided")).to_be_visible()
    staff_page.context.close()

    # Alice sees it issued and downloads the PDF.
    page.reload()
    expect(page.locator("table .badge", has_text="Issued")).to_be_visible()
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download PDF").click()
    assert download_info.value.suggested_filename == "invoice-26110000000012345678.pdf"
    assert download_info.value.path().read_bytes() == PDF
    assert InvoiceRequest.objects.get().status == InvoiceRequest.Status.ISSUED
