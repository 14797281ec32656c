"""The header's bell: an icon and its unread count that fits the header at 1366 px and 390 px, and
leads to the inbox, whose lines and settings page fit a phone."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from notifications.models import Kind
from notifications.services import Message, notify

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", [1366, 390])
def test_the_bell_shows_the_unread_count_and_opens_the_inbox(
    live_server, page: Page, alice, sign_in, screenshot_dir, width
):
    for i in range(3):
        notify(
            user=alice,
            kind=Kind.PREEMPTED,
            render=lambda i=i: Message(title=f"gpu-box-{i} is being preempted", body="Its GPUs are needed."),
            link="/instances/",
        )
    sign_in(page, alice)
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(live_server.url + "/dashboard/")
    bell = page.locator("[data-notification-bell]")
    expect(bell).to_be_visible()
    expect(page.locator("[data-notification-count]")).to_have_text("3")
    header = page.locator("header.topbar").bounding_box()
    box = bell.bounding_box()
    assert box["x"] + box["width"] <= header["x"] + header["width"] and box["height"] < 40
    assert page.evaluate("document.documentElement.scrollWidth") <= width  # nothing pushed off the side
    page.screenshot(path=str(screenshot_dir / f"bell-{width}.png"))
    bell.click()
    expect(page.get_by_role("heading", name="Notifications")).to_be_visible()
    expect(page.get_by_text("gpu-box-2 is being preempted")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(screenshot_dir / f"inbox-{width}.png"), full_page=True)
    page.get_by_role("button", name="Mark all read").click()
    expect(page.locator("[data-notification-count]")).to_be_hidden()
    page.goto(live_server.url + "/notifications/preferences/")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(screenshot_dir / f"preferences-{width}.png"), full_page=True)
