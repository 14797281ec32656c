"""A newcomer holding the ¥10 trial credit opens the launch page on the cheapest card with room, priced
as such beside the Launch button, not on the H200 that happens to be listed first."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from instances.catalogue import catalogue_seed
from instances.tests.conftest import fund

pytestmark = pytest.mark.browser


def test_a_newcomer_starts_on_the_cheapest_card_and_can_launch_it(
    live_server, page: Page, alice, sign_in, screenshot_dir
):
    catalogue_seed()  # the simulated cloud's demo fleet: every model has room in both regions
    fund(alice, 1000)
    sign_in(page, alice)
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(live_server.url + "/instances/launch/")

    chosen = page.locator(".gpu-card:has(input:checked)")
    expect(chosen).to_have_count(1)
    expect(chosen.locator(".gpu-name")).to_have_text("RTX 3090 24GB")
    expect(page.locator("#price-hour")).to_have_text("¥1.32/h")
    expect(page.locator("#launch-button")).to_be_enabled()
    page.screenshot(path=str(screenshot_dir / "launch-default.png"), full_page=True)
