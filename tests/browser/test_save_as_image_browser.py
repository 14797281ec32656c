"""In Chromium, end to end on the local backend: alice launches an instance on "This host", changes a file in
it from a JupyterLab cell, saves it as an image from its page, waits for "Ready", clicks "Launch from it",
launches, and in the new instance's JupyterLab reads the change back."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from console.tests.conftest import session_cookie
from providers.local.tests.local_helpers import asgi_server
from providers.local.tests.test_local_containers import MINIMAL, container_images, registry  # noqa: F401 (fixtures)
from tests.browser.local_flow import Worker, browser_context, launch_here, run_cell

pytestmark = [pytest.mark.local, pytest.mark.containers, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHANGE = "kept by the saved image"


@pytest.fixture
def in_a_container(settings, tmp_path, hooks_override, container_images):  # noqa: F811
    """The local backend running instances as podman containers of the minimal image (as `make run` with
    CONSOLE_LOCAL_BACKEND=1 does): only containers can be saved as images."""
    from console.hooks import proxy_target
    from instances.catalogue import catalogue_seed
    from instances.proxy_targets import instance_proxy_target
    from providers import get_backend
    from providers.local.tests.local_helpers import local_backends

    settings.PROVISIONING_BACKENDS = local_backends(
        tmp_path / "instances",
        services=("lab",),
        ENGINE="podman",
        LIMITS={"CPUS": 1, "MEMORY_GB": 1, "MAX_MEMORY_GB": 2, "PIDS_LIMIT": 256},
        IMAGES={"default": MINIMAL},
    )
    hooks_override(proxy_target, instance_proxy_target)
    backend = get_backend("local")
    missing = backend.runtime.missing_components()
    if missing:
        pytest.skip("; ".join(missing.values()))
    catalogue_seed()
    yield backend
    for key in backend.runtime.instance_keys():
        backend.runtime.destroy(key)


def test_save_as_image_then_launch_from_it_and_see_the_change(
    in_a_container,
    registry,  # noqa: F811
    settings,
    browser,
    screenshot_dir,
):
    from accounts.tests.factories import UserFactory
    from instances.tests.conftest import fund

    settings.CONSOLE_REGISTRY = registry
    alice = UserFactory(email="alice@example.com")
    fund(alice, 1_000_000)
    worker = Worker(alice)
    worker.start()
    try:
        with asgi_server() as base_url:
            page = browser_context(browser, base_url, session_cookie(alice)["sessionid"]).new_page()
            page.goto(f"{base_url}/instances/launch/")
            launch_here(page, "set-up")
            # /var/tmp is in the container's own layer (not the disk, not a tmpfs): what a saved image keeps.
            written = run_cell(
                page, f"open('/var/tmp/change.txt', 'w').write({CHANGE!r}); print(open('/var/tmp/change.txt').read())"
            )
            assert written == CHANGE

            page.reload()  # the card is outside the live status part: the page as it is now that it runs
            card = page.locator("#save-as-image")
            expect(card).to_contain_text("/home/user")  # what is and is not kept, said before saving
            card.get_by_label("Image name").fill("my-env")
            card.get_by_label("Tag").fill("v1")
            card.get_by_role("button", name="Save as image").click()
            expect(page.locator("#save-as-image [data-image-status]")).to_have_text("Ready", timeout=120_000)
            page.screenshot(path=str(screenshot_dir / "save-as-image-ready.png"), full_page=True)

            page.goto(f"{base_url}/instances/images/")
            expect(page.locator("#image-table")).to_contain_text("my-env:v1")
            page.get_by_role("link", name="Launch from it").first.click()
            expect(page.locator("#image-field input[name=image]:checked")).to_have_count(1)
            launch_here(page, "from-image")
            page.screenshot(path=str(screenshot_dir / "launched-from-saved-image.png"), full_page=True)
            assert run_cell(page, "print(open('/var/tmp/change.txt').read())") == CHANGE
    finally:
        worker.done.set()
        worker.join(timeout=10)
