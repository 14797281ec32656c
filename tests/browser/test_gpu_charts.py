"""In Chromium: the instance page draws its GPU charts with data (the vendored uPlot, fed by the
metrics API), on a 1366 px laptop and on a 390 px phone, where nothing scrolls sideways; the list
shows the utilisation figure and sparkline."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def sampled(settings):
    """alice's running two-card instance with the last 20 minutes of samples, as the worker collects them."""
    from accounts.tests.factories import UserFactory
    from instances.catalogue import catalogue_seed
    from instances.services import instance_sync
    from instances.tests.conftest import SMALL_FLEET, fund, launch
    from metrics.services import metrics_collect
    from providers.simulated.models import SimulatedMachine

    settings.PROVISIONING_BACKENDS = {
        "default": {
            "BACKEND": "providers.simulated.backend.SimulatedBackend",
            "OPTIONS": {"FLEET": SMALL_FLEET, "BOOT_DELAY_S": 3600},
        }
    }
    catalogue_seed()
    alice = UserFactory(email="alice@example.com")
    fund(alice, 100_000)
    instance = launch(alice, name="charted", count=2)
    SimulatedMachine.objects.filter(key=str(instance.pk)).update(ready_at=timezone.now() - timedelta(hours=1))
    instance_sync(instance_id=instance.pk)
    instance.refresh_from_db()
    assert instance.status == "running"
    now = timezone.now()
    for tick in range(80):
        metrics_collect(now=now - timedelta(seconds=15 * tick))
    return alice, instance


def _charts(page: Page):
    charts = page.locator("#gpu-metrics .uplot")
    expect(charts).to_have_count(4)
    expect(page.locator("[data-gpu-empty]")).to_be_hidden()
    expect(page.locator("[data-gpu-summary]")).to_contain_text("%")
    expect(page.locator("#gpu-metrics .u-legend").first).to_contain_text("GPU 1")
    return charts


@pytest.mark.parametrize(("width", "height"), [(1366, 768), (390, 844)])
def test_the_instance_page_draws_four_charts_with_data(
    live_server, page: Page, sign_in, sampled, screenshot_dir, width, height
):
    alice, instance = sampled
    sign_in(page, alice)
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{live_server.url}/instances/{instance.pk}/")
    charts = _charts(page)
    page.locator("#gpu-metrics").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshot_dir / f"gpu-charts-{width}.png"), full_page=True)

    assert page.evaluate("document.documentElement.scrollWidth") <= width, "the page scrolls sideways"
    card = page.locator("#gpu-metrics").bounding_box()
    for i in range(4):
        box = charts.nth(i).bounding_box()
        assert box["x"] >= card["x"] and box["x"] + box["width"] <= card["x"] + card["width"] + 1
    if width > 1000:
        assert charts.nth(0).bounding_box()["y"] == charts.nth(1).bounding_box()["y"], "two charts a row on a laptop"

    page.get_by_role("button", name="7 days").click()
    expect(page.get_by_role("button", name="7 days")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#gpu-metrics .uplot")).to_have_count(4)
    # The processes on each card now, under the charts: one per card on the simulated cloud.
    expect(page.locator("[data-gpu-processes] tr")).to_have_count(2)
    expect(page.locator("[data-gpu-processes] tr").first).to_contain_text("python3")


def test_the_list_shows_the_figure_and_sparkline(live_server, page: Page, sign_in, sampled, screenshot_dir):
    alice, _instance = sampled
    sign_in(page, alice)
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto(f"{live_server.url}/instances/")
    cell = page.locator("td.gpu-use").first
    expect(cell).to_contain_text("%")
    expect(cell.locator("svg.sparkline polyline")).to_have_count(1)
    assert cell.locator("polyline").get_attribute("points").count(",") >= 4
    page.screenshot(path=str(screenshot_dir / "instances-list-1366.png"), full_page=True)
