"""The launch page's images (size, contents, cached in the chosen region or not) and the instance page's
image pull and launch timeline, at a laptop's width and a phone's, with nothing wider than the screen."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from instances.catalogue import catalogue_seed
from instances.models import Image, Region
from instances.services import instance_sync, nodes_sync
from instances.tests.conftest import SMALL_FLEET, fund, launch

pytestmark = pytest.mark.browser
GB = 1_000_000_000
WIDTHS = (1366, 390)


def _fleet(settings, **options) -> None:
    settings.PROVISIONING_BACKENDS = {
        "default": {
            "BACKEND": "providers.simulated.backend.SimulatedBackend",
            "OPTIONS": {"FLEET": SMALL_FLEET, "BOOT_DELAY_S": 10, "PULL_BYTES_PER_S": GB, **options},
        }
    }


def _fits(page: Page) -> None:
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_the_launch_page_says_which_images_the_chosen_regions_nodes_hold(
    live_server, page: Page, alice, sign_in, settings, screenshot_dir
):
    _fleet(settings, PRECACHED=["pytorch-2.5-cu124"])
    catalogue_seed()
    fund(alice, 100_000)
    nodes_sync(alias="default")
    torch = Image.objects.get(slug="pytorch-2.5-cu124")
    torch.contents = {"python": "3.12.7", "cuda": "12.4", "torch": "2.5.1"}
    torch.save()
    east = Region.objects.get(slug="cn-east-1")
    sign_in(page, alice)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(live_server.url + "/instances/launch/")
        card = page.locator(f'.image-choice[data-image="{torch.pk}"]')
        expect(card.locator(".image-meta")).to_contain_text("Python 3.12.7")
        expect(card.locator(".image-meta")).to_contain_text("PyTorch 2.5.1")
        expect(card.locator(".image-cache:visible")).to_have_text(
            "Cached on every node of this model here: starts without a pull"
        )
        jax = page.locator(".image-choice", has_text="JAX")
        expect(jax.locator(".image-cache:visible")).to_contain_text("Not cached here: the first boot pulls")
        page.locator(f'.region-choice[data-region="{east.pk}"]').click()
        expect(card.locator(".image-cache:visible")).to_have_count(1)
        expect(card.locator(f'[data-image-cache-region="{east.pk}"]')).to_be_visible()
        _fits(page)
        page.screenshot(path=str(screenshot_dir / f"launch-images-{width}.png"), full_page=True)
        page.locator("#image-field").screenshot(path=str(screenshot_dir / f"launch-images-field-{width}.png"))


def test_the_instance_page_shows_the_pull_then_the_timeline(
    live_server, page: Page, alice, sign_in, settings, screenshot_dir
):
    _fleet(settings)
    catalogue_seed()
    fund(alice, 100_000)
    t0 = timezone.now()
    with mock.patch("django.utils.timezone.now", return_value=t0):
        instance = launch(alice, name="pulling")
    for seconds in (3, 5):
        with mock.patch("django.utils.timezone.now", return_value=t0 + timedelta(seconds=seconds)):
            instance_sync(instance_id=instance.pk)
    sign_in(page, alice)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/instances/{instance.pk}/")
        expect(page.locator("#image-pull")).to_contain_text("about 4.9 s left")
        expect(page.locator('#boot-timeline li[data-stage="pulling"]')).to_contain_text("in progress")
        _fits(page)
        page.screenshot(path=str(screenshot_dir / f"instance-pulling-{width}.png"), full_page=True)
        page.locator("#boot-timeline").screenshot(path=str(screenshot_dir / f"instance-pulling-card-{width}.png"))
    for seconds in (11, 13, 16, 20):
        with mock.patch("django.utils.timezone.now", return_value=t0 + timedelta(seconds=seconds)):
            instance_sync(instance_id=instance.pk)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/instances/{instance.pk}/")
        expect(page.locator("#boot-timeline li")).to_have_count(6)
        expect(page.locator('#boot-timeline li[data-stage="pulling"]')).to_contain_text("8.0 s")
        expect(page.locator("#boot-timeline")).to_contain_text("Request to running in")
        _fits(page)
        page.screenshot(path=str(screenshot_dir / f"instance-timeline-{width}.png"), full_page=True)
        page.locator("#boot-timeline").screenshot(path=str(screenshot_dir / f"instance-timeline-card-{width}.png"))
