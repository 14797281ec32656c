"""On a page longer than the window, the sidebar's dark column reaches the bottom of the page (the
footer included), and its links stay in view while the page scrolls."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from instances.catalogue import catalogue_seed

pytestmark = pytest.mark.browser


def test_the_sidebar_background_reaches_the_bottom_of_a_long_page(
    live_server, page: Page, alice, sign_in, screenshot_dir
):
    catalogue_seed()
    sign_in(page, alice)
    page.set_viewport_size({"width": 1366, "height": 600})
    page.goto(live_server.url + "/instances/launch/")
    expect(page.get_by_role("heading", name="Launch an instance")).to_be_visible()
    page_height = page.evaluate("document.documentElement.scrollHeight")
    assert page_height > 1200, "the test needs a page much longer than the window"

    sidebar = page.locator("aside.sidebar")
    box = sidebar.bounding_box()
    assert box["y"] == 0 and box["height"] >= page_height - 1, (box, page_height)
    page.screenshot(path=str(screenshot_dir / "long-page-1366.png"), full_page=True)

    page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
    page.wait_for_function("() => window.scrollY > 0")
    # What lies under the bottom-left corner of the window is the sidebar, not the page's background...
    assert page.evaluate("!!document.elementFromPoint(5, window.innerHeight - 2).closest('aside.sidebar')")
    # ...and its links have scrolled along.
    expect(sidebar.get_by_role("link", name="Instances")).to_be_in_viewport(ratio=1)
    expect(page.locator("footer.footer")).to_be_in_viewport()
    page.screenshot(path=str(screenshot_dir / "long-page-bottom-1366.png"))
