"""The instance page's "Start without GPU" (beside Start, with its price) and the notice of a run without
GPU, in Chromium at 1366 px and at a phone's 390 px: the buttons wrap, nothing pushes the page sideways."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from instances.catalogue import catalogue_seed
from instances.services import instance_start, instance_stop, nodes_sync
from instances.tests.conftest import committed, fund, running

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _fits(page: Page, width: int, name: str, screenshot_dir) -> None:
    page.screenshot(path=str(screenshot_dir / f"{name}-{width}.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= width, name


@pytest.mark.parametrize("width,height", [(1366, 800), (390, 844)])
def test_start_without_gpu_and_its_notice_fit_the_window(
    live_server, page: Page, alice, sign_in, screenshot_dir, width, height
):
    catalogue_seed()
    nodes_sync(alias="default")
    fund(alice, 1_000_000)
    instance = running(alice, gpu="a800-80g", count=8, name="llama-finetune-with-a-long-name")
    with committed():
        instance_stop(instance=instance)

    sign_in(page, alice)
    page.set_viewport_size({"width": width, "height": height})
    page.goto(live_server.url + f"/instances/{instance.pk}/")
    button = page.locator("#start-no-gpu")
    expect(button).to_contain_text("Start without GPU · ¥0.10/h")
    expect(button).to_be_in_viewport(ratio=1)
    _fits(page, width, "instance-stopped-no-gpu-offer", screenshot_dir)

    instance.refresh_from_db()
    with committed():
        instance_start(instance=instance, no_gpu=True)
    page.goto(live_server.url + f"/instances/{instance.pk}/")
    notice = page.locator("#no-gpu-run")
    expect(notice).to_contain_text("Running without GPU")
    expect(notice).to_be_in_viewport()
    _fits(page, width, "instance-running-no-gpu", screenshot_dir)
