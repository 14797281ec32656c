"""Bring your own image in Chromium: on the Images page alice imports a good reference (an image pushed
to the console's registry here) and reads what was found (its size, its platform, that the console will
mount its start script), then "Launch from it" offers it on the launch page, checked. A bad reference, a
registry the console does not allow and an image for another architecture are each refused beside the
form, saying why. A private image needs her login, saved on the Secrets page (never shown again)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from instances.models import Image
from instances.tests import oci_images

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not oci_images.installed(), reason="needs docker-registry and skopeo"),
]


@pytest.fixture
def registries(tmp_path, settings):
    with oci_images.open_and_private_registries(tmp_path, settings, password="s3cret-browser") as both:
        yield both


def _import(page: Page, reference: str) -> None:
    form = page.locator("#image-import")
    form.scroll_into_view_if_needed()
    form.locator("input[name=reference]").fill(reference)
    form.locator("button[type=submit]").click()


def test_import_a_good_reference_and_see_a_bad_one_refused(
    live_server, page: Page, alice, sign_in, registries, tmp_path, screenshot_dir
):
    from instances.catalogue import catalogue_seed
    from instances.tests.conftest import fund

    catalogue_seed()
    fund(alice, 1_000_000)
    open_registry, private = registries
    oci_images.push(open_registry, tmp_path / "good", "team/tools", "1.0")
    oci_images.push(open_registry, tmp_path / "arm", "team/arm", "1", architecture="arm64")
    oci_images.push(private, tmp_path / "private", "secret/model", "2")

    sign_in(page, alice)
    page.set_viewport_size({"width": 1366, "height": 800})
    page.goto(live_server.url + "/instances/images/")
    expect(page.locator("#image-import")).to_contain_text(open_registry.address)

    _import(page, "not a reference!")
    refusal = page.locator("#image-import")
    expect(refusal).to_contain_text("not an image reference")
    _import(page, "registry.example.com/team/tools:1.0")
    expect(refusal).to_contain_text("can be imported only from")
    _import(page, f"{open_registry.address}/team/arm:1")
    expect(refusal).to_contain_text("built for linux/arm64")
    _import(page, f"{private.address}/secret/model:2")
    expect(refusal).to_contain_text("is private")
    page.screenshot(path=str(screenshot_dir / "byoi-refused.png"), full_page=True)
    assert not Image.objects.filter(owner=alice).exists()

    _import(page, f"{open_registry.address}/team/tools:1.0")
    expect(page.get_by_text("Imported tools:1.0")).to_be_visible()
    image = Image.objects.get(owner=alice)
    row = page.locator(f"#image-{image.slug}")
    expect(row).to_contain_text("linux/amd64")
    expect(row).to_contain_text("Start script mounted at launch")
    expect(row.locator("[data-image-status]")).to_have_text("Ready")
    page.screenshot(path=str(screenshot_dir / "byoi-imported.png"), full_page=True)

    page.goto(live_server.url + "/secrets/")
    credentials = page.locator("#registry-credentials")
    credentials.scroll_into_view_if_needed()
    credentials.locator("input[name=host]").fill(private.address)
    credentials.locator("input[name=username]").fill("ci")
    credentials.locator("input[name=password]").fill("s3cret-browser")
    credentials.locator("button[type=submit]").click()
    expect(page.locator("#registry-credential-table")).to_contain_text(private.address)
    assert "s3cret-browser" not in page.content()
    page.goto(live_server.url + "/instances/images/")
    _import(page, f"{private.address}/secret/model:2")
    expect(page.get_by_text("Imported model:2")).to_be_visible()

    row.get_by_role("link", name="Launch from it").click()
    expect(page.locator(f'input[name=image][value="{image.pk}"]')).to_be_checked()
