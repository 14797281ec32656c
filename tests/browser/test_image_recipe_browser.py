"""The Dockerfile round trip in Chromium, on the simulated cloud: alice opens her saved image's recipe from the
Images page, sees it read-only with its download, edits it in the Build form; a FROM outside the console's
registry is refused beside the form, saying why; the edited recipe builds, and the new image's page says
Ready with its build log."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from instances.models import Image

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_view_edit_build_and_see_ready(live_server, page: Page, alice, sign_in, settings, screenshot_dir):
    from instances.catalogue import catalogue_seed
    from instances.services import image_save
    from instances.tests.conftest import backends, committed, fund, running

    settings.PROVISIONING_BACKENDS = backends()
    settings.CONSOLE_REGISTRY = "registry.simulated.invalid"
    catalogue_seed()
    fund(alice, 1_000_000)
    instance = running(alice)
    with committed():
        saved = image_save(instance=instance, actor=alice, name="my-env", tag="v1")
    saved.refresh_from_db()
    assert saved.status == Image.Status.READY

    sign_in(page, alice)
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(live_server.url + "/instances/images/")
    page.locator(f"#image-{saved.slug}").get_by_role("link", name="Recipe").click()
    expect(page.locator("[data-recipe]")).to_contain_text(f"# Saved as: {saved.pinned_ref}")
    expect(page.get_by_role("link", name="Download as Containerfile")).to_be_visible()
    form = page.locator("#image-build")
    expect(form.locator("input[name=tag]")).to_have_value("v2")

    form.locator("textarea[name=recipe]").fill("FROM docker.io/library/debian:12\n")
    form.get_by_role("button", name="Build image").click()
    expect(page.locator("#image-build")).to_contain_text("is not an image of this console's registry")
    assert not Image.objects.filter(owner=alice, tag="v2").exists()

    edited = f"FROM {saved.pinned_ref}\nRUN echo edited > /etc/motd\n"
    page.locator("#image-build textarea[name=recipe]").fill(edited)
    page.locator("#image-build").get_by_role("button", name="Build image").click()
    expect(page.locator("#image-build-status [data-image-status]")).to_have_text("Ready")
    expect(page.locator("[data-build-log]")).to_contain_text("RUN echo edited > /etc/motd")
    expect(page.locator("[data-recipe]")).to_contain_text("RUN echo edited > /etc/motd")
    page.screenshot(path=str(screenshot_dir / "image-built-from-recipe.png"), full_page=True)
    # On a phone the long FROM line scrolls inside its box; the page itself does not scroll sideways.
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    expect(page.locator("[data-recipe]")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    page.screenshot(path=str(screenshot_dir / "image-recipe-390.png"), full_page=True)
    built = Image.objects.get(owner=alice, name="my-env", tag="v2")
    assert built.status == Image.Status.READY and built.recipe == edited
