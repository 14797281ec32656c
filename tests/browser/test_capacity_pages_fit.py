"""The pages of reserved capacity and cluster resizing, seen in Chromium at 1366 px and at a phone's
390 px: the staff's reservations, the holder's quota page, the quota review with reserved cards, and a
running cluster's page with its "Cluster size" card. Nothing pushes any of them sideways."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from instances.capacity.reservations import reservation_create
from instances.catalogue import catalogue_seed
from instances.models import GpuModel, Region
from instances.services import nodes_sync
from instances.tests.conftest import fund, running

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _fits(page: Page, width: int, name: str, screenshot_dir) -> None:
    page.screenshot(path=str(screenshot_dir / f"{name}-{width}.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= width, name


@pytest.mark.parametrize("width,height", [(1366, 800), (390, 844)])
def test_reservation_and_resize_pages_fit_the_window(
    live_server, page: Page, alice, staff, sign_in, screenshot_dir, settings, width, height
):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 16
    catalogue_seed()
    nodes_sync(alias="default")
    fund(alice, 1_000_000)
    reservation_create(
        account=alice,
        region=Region.objects.get(slug="cn-north-1"),
        gpu_model=GpuModel.objects.get(slug="h800"),
        cards=4,
        ends_at=timezone.now() + timedelta(days=7),
        staff=staff,
        note="Pretraining run for the vision group, agreed with sales",
    )
    cluster = running(alice, gpu="a800-80g", count=1, nodes=2)

    sign_in(page, staff)
    page.set_viewport_size({"width": width, "height": height})
    page.goto(live_server.url + "/staff/reservations/")
    expect(page.get_by_text("alice@example.com").first).to_be_visible()
    _fits(page, width, "staff-reservations", screenshot_dir)
    page.goto(live_server.url + "/quota/review/")
    _fits(page, width, "quota-review", screenshot_dir)

    page.context.clear_cookies()
    sign_in(page, alice)
    page.goto(live_server.url + "/quota/")
    expect(page.get_by_text("H800", exact=False).first).to_be_visible()
    _fits(page, width, "quota-with-reservation", screenshot_dir)
    page.goto(live_server.url + f"/instances/{cluster.pk}/")
    expect(page.get_by_text("Cluster size").first).to_be_visible()
    _fits(page, width, "cluster-instance", screenshot_dir)
