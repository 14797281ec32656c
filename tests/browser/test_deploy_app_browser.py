"""In Chromium, end to end on the local backend: alice deploys TensorBoard from its app page onto "This
host", watches the deployment's steps until it is ready, opens its WebUI through the console and sees her
training run's loss curve; charlie, opening the same URL, gets 404."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from apps_marketplace.proxy_targets import deployment_proxy_target
from console.hooks import proxy_target
from console.tests.conftest import session_cookie
from providers.local.tests.local_helpers import asgi_server, local_backends
from tests.browser.local_flow import Worker, browser_context

pytestmark = [pytest.mark.local, pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def this_host_apps(settings, tmp_path, hooks_override):
    from apps_marketplace.loaders import marketplace_catalogue_load
    from instances.catalogue import catalogue_seed
    from providers import get_backend
    from providers.base import AppLaunch

    settings.PROVISIONING_BACKENDS = local_backends(tmp_path / "instances", services=())
    hooks_override(proxy_target, deployment_proxy_target)
    backend = get_backend("local")
    why = backend.app_check(AppLaunch(name="tensorboard", argv=("tensorboard",)))
    if why:
        pytest.skip(f"{why} (run `make local-deps`)")
    catalogue_seed()
    marketplace_catalogue_load()
    yield backend
    for key in backend.runtime.instance_keys():
        backend.runtime.destroy(key)


def test_deploy_tensorboard_then_open_its_webui_for_the_owner_only(this_host_apps, browser, screenshot_dir, tmp_path):
    from accounts.tests.factories import UserFactory
    from apps_marketplace.tests.test_deployment_local_app import _write_scalars
    from instances.tests.conftest import fund

    alice, charlie = UserFactory(email="alice@example.com"), UserFactory(email="charlie@example.com")
    fund(alice, 1_000_000)
    logs = tmp_path / "runs"
    _write_scalars(logs, "resnet-baseline", this_host_apps)
    worker = Worker(alice)
    worker.start()
    try:
        with asgi_server() as base_url:
            page = browser_context(browser, base_url, session_cookie(alice)["sessionid"]).new_page()
            page.goto(f"{base_url}/apps/tensorboard/")
            form = page.locator("#deploy-form")
            form.get_by_label("Region").select_option(label="This host")
            form.get_by_label("GPU model").select_option(value="h200")
            form.get_by_label("Log directory").fill(str(logs))
            form.get_by_role("button", name="Deploy").click()

            expect(page.locator("#api-key")).to_contain_text("dk-")  # shown once, on arrival
            expect(page.locator("#deployment-badge")).to_have_text("Ready", timeout=60_000)
            page.screenshot(path=str(screenshot_dir / "deployment-ready.png"), full_page=True)

            with page.context.expect_page() as opened:
                page.get_by_role("link", name="Open WebUI").click()
            webui = opened.value
            expect(webui.get_by_text("resnet-baseline").first).to_be_visible(timeout=30_000)
            expect(webui.get_by_text("loss").first).to_be_visible()
            webui.screenshot(path=str(screenshot_dir / "deployment-webui.png"), full_page=True)
            webui_url = webui.url
            assert "/app/" in webui_url

            stranger = browser_context(browser, base_url, session_cookie(charlie)["sessionid"]).new_page()
            assert stranger.goto(webui_url).status == 404
            assert stranger.goto(page.url).status == 404  # the deployment page too
    finally:
        worker.done.set()
        worker.join(timeout=10)
