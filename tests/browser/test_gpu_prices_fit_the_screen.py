"""The "GPUs and prices" table shows its price column whole: on a 1366 px laptop beside "Get started",
and on a 390 px phone, where nothing on the page scrolls sideways."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from instances.catalogue import catalogue_seed

pytestmark = pytest.mark.browser

NO_SIDEWAYS_SCROLL = "el => el.scrollWidth <= el.clientWidth"


@pytest.fixture
def catalogue(db):
    catalogue_seed()


def _prices(page: Page):
    table = page.locator(".gpu-table")
    expect(table.locator("tbody tr")).to_have_count(7)
    return table


def test_at_1366_px_the_dashboard_shows_every_price_without_scrolling_sideways(
    live_server, page: Page, alice, catalogue, sign_in, screenshot_dir
):
    sign_in(page, alice)
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto(live_server.url + "/dashboard/")
    table = _prices(page)
    page.screenshot(path=str(screenshot_dir / "dashboard-1366.png"), full_page=True)

    assert page.locator(".gpu-table-wrap").evaluate(NO_SIDEWAYS_SCROLL), "the table scrolls inside its card"
    expect(table.locator("th.gpu-price")).to_be_in_viewport(ratio=1)
    expect(table.locator("tbody tr").first.locator("td.gpu-price")).to_have_text("¥14.90")
    expect(table.locator("tbody tr").first.locator("td.gpu-price")).to_be_in_viewport(ratio=1)
    # The per-card vCPU and RAM are still there, under the name.
    expect(table.locator("tbody tr").first).to_contain_text("16 vCPU · 200 GB RAM per card")


@pytest.mark.parametrize("path", ["/dashboard/", "/"])
def test_on_a_390_px_phone_the_prices_fit_and_the_page_does_not_scroll_sideways(
    live_server, page: Page, alice, catalogue, sign_in, screenshot_dir, path
):
    if path != "/":
        sign_in(page, alice)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(live_server.url + path)
    table = _prices(page)
    page.screenshot(path=str(screenshot_dir / f"prices-390{path.replace('/', '-')}.png"), full_page=True)

    assert page.evaluate("document.documentElement.scrollWidth") <= 390, "the page scrolls sideways on a phone"
    assert page.locator(".gpu-table-wrap").evaluate(NO_SIDEWAYS_SCROLL), "the prices hide behind a sideways scroll"
    for row in (table.locator("tbody tr").first, table.locator("tbody tr").last):
        price = row.locator("td.gpu-price")
        price.scroll_into_view_if_needed()
        expect(price).to_be_in_viewport(ratio=1)
    expect(table.locator("tbody tr").last.locator("td.gpu-price")).to_have_text("¥1.32")
