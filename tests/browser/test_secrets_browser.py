"""The Secrets page and the instance page's choice of secrets, in Chromium at 1366 px and at a phone's
390 px: save a secret through the form, see its name (never its value), choose it for an instance; nothing
pushes the page sideways."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from instances.catalogue import catalogue_seed
from instances.services import nodes_sync
from instances.tests.conftest import fund, running

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VALUE = "wandb-browser-topsecret-0123456789abcdef"


def _fits(page: Page, width: int, name: str, screenshot_dir) -> None:
    page.screenshot(path=str(screenshot_dir / f"{name}-{width}.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= width, name


@pytest.mark.parametrize("width,height", [(1366, 800), (390, 844)])
def test_save_a_secret_and_choose_it_for_an_instance(
    live_server, page: Page, alice, sign_in, screenshot_dir, width, height
):
    catalogue_seed()
    nodes_sync(alias="default")
    fund(alice, 1_000_000)
    instance = running(alice, name="llama-finetune-with-a-long-name")

    sign_in(page, alice)
    page.set_viewport_size({"width": width, "height": height})
    page.goto(live_server.url + "/secrets/")
    _fits(page, width, "secrets-empty", screenshot_dir)
    page.fill("#id_name", "WANDB_API_KEY")
    page.fill("#id_value", VALUE)
    page.click("#add-secret button[type=submit]")
    expect(page.locator("#secret-table")).to_contain_text("WANDB_API_KEY")
    assert VALUE not in page.content()
    _fits(page, width, "secrets-saved", screenshot_dir)

    page.goto(live_server.url + f"/instances/{instance.pk}/")
    card = page.locator("#instance-secrets")
    card.scroll_into_view_if_needed()
    card.locator("input[name=env_WANDB_API_KEY]").check()
    card.locator("button[type=submit]").click()
    expect(page.get_by_text("Secrets saved: the instance gets them at its next start or restart.")).to_be_visible()
    assert list(instance.secret_choices.values_list("secret__name", "env")) == [("WANDB_API_KEY", True)]
    _fits(page, width, "instance-secrets", screenshot_dir)
