"""The header's context switcher: it shows Personal or the team, switches in one click, and the header
and the team page fit the window at 1366 px and at a phone's 390 px."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from teams import services
from teams.models import Membership

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width,height", [(1366, 800), (390, 844)])
def test_switching_to_the_team_and_back_fits_the_window(
    live_server, page: Page, alice, bob, sign_in, screenshot_dir, width, height
):
    team = services.team_create(user=alice, name="Computer Vision Laboratory")
    Membership.objects.create(team=team, user=bob, role="member")
    sign_in(page, alice)
    page.set_viewport_size({"width": width, "height": height})
    page.goto(live_server.url + "/teams/" + team.slug + "/")
    switcher = page.locator("details.context-menu")
    expect(switcher.locator("summary")).to_have_text("Personal")
    switcher.locator("summary").click()
    page.screenshot(path=str(screenshot_dir / f"team-switcher-open-{width}.png"))
    switcher.get_by_role("button", name="Computer Vision Laboratory").click()
    expect(page.locator("details.context-menu summary")).to_have_text("Computer Vision Laboratory")
    assert page.url.endswith(f"/teams/{team.slug}/")
    # Nothing pushes the page sideways: not the header with a long team name, not the members table.
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    header = page.locator("header.topbar").bounding_box()
    assert header["width"] <= width
    for selector in ["details.context-menu", "details.account-menu"]:
        box = page.locator(selector).bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, (selector, box)
    page.locator("#member-list details.member-actions summary").last.click()
    page.screenshot(path=str(screenshot_dir / f"team-page-{width}.png"), full_page=True)
    page.locator("details.context-menu summary").click()
    page.locator("details.context-menu").get_by_role("button", name="Personal").click()
    expect(page.locator("details.context-menu summary")).to_have_text("Personal")
