"""The instance page's line of starts on a laptop and a phone: before a start, the outlook says no node
has the cards; a start refused for lack of cards offers "Wait in line" beside its reason, the place in line shows with "Leave the line", nothing wider than the screen."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from instances.catalogue import catalogue_seed
from instances.models import Instance
from instances.services import instance_stop
from instances.tests.conftest import backends, committed, fund, running

pytestmark = pytest.mark.browser
WIDTHS = (1366, 390)


def _fits(page: Page) -> None:
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_waiting_in_line_and_leaving_it_fit_the_screen(
    live_server, page: Page, alice, bob, sign_in, settings, screenshot_dir
):
    settings.PROVISIONING_BACKENDS = backends()
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    catalogue_seed()
    fund(alice, 1_000_000)
    fund(bob, 1_000_000)
    instance = running(alice, gpu="h800", count=8, name="a-rather-long-instance-name-for-a-phone")
    with committed():
        instance_stop(instance=instance)
    running(bob, gpu="h800", count=8)  # the only H800 node
    sign_in(page, alice)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/instances/{instance.pk}/")
        outlook = page.locator("#start-outlook")  # before any start: the cards are not there
        expect(outlook).to_contain_text("so a start now would be refused")
        expect(outlook.get_by_role("button", name="Wait in line")).to_be_visible()
        _fits(page)
        page.screenshot(path=str(screenshot_dir / f"start-outlook-{width}.png"), full_page=True)
        page.get_by_role("button", name="Start", exact=True).click()
        offer = page.locator("#start-queue")
        expect(offer).to_contain_text("free H800")
        _fits(page)
        page.screenshot(path=str(screenshot_dir / f"start-queue-offer-{width}.png"), full_page=True)
        offer.get_by_role("button", name="Wait in line").click()
        expect(page.locator("#start-queue")).to_contain_text("(position 1)")
        _fits(page)
        page.screenshot(path=str(screenshot_dir / f"start-queue-waiting-{width}.png"), full_page=True)
        assert Instance.objects.get(pk=instance.pk).start_queued_at is not None
        page.locator("#start-queue").get_by_role("button", name="Leave the line").click()
        expect(page.locator("#start-queue")).to_have_count(0)
        assert Instance.objects.get(pk=instance.pk).start_queued_at is None
