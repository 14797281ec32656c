"""A browser watches an instance go from provisioning to running on screen, without a reload.

The console runs under uvicorn (ASGI, so the WebSocket works) in a thread of this process, against
the test database, with the Redis channel layer (the one production uses across processes). The test
plays the worker: it finishes the boot at the provider and syncs, and the page must follow by itself.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = Path("/usr/bin/chromium")
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _redis_up() -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_timeout=5).ping())
    except Exception:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def asgi_server(settings):
    import uvicorn

    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} does not exist: install Debian's chromium (make browser-deps)")
    if not _redis_up():
        pytest.skip(f"Redis is not reachable at {REDIS_URL}")
    from console.settings import redis_channel_layer

    settings.CHANNEL_LAYERS = {"default": redis_channel_layer(REDIS_URL)}
    from console.asgi import application

    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(application, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


def _booting_instance(settings):
    """alice, and an instance of hers that is booting until the test says otherwise."""
    from accounts.tests.factories import UserFactory
    from instances.catalogue import catalogue_seed
    from instances.tests.conftest import SMALL_FLEET, fund, launch

    settings.PROVISIONING_BACKENDS = {
        "default": {
            "BACKEND": "providers.simulated.backend.SimulatedBackend",
            "OPTIONS": {"FLEET": SMALL_FLEET, "BOOT_DELAY_S": 3600},
        }
    }
    catalogue_seed()
    alice = UserFactory(email="alice@example.com")
    fund(alice, 100_000)
    instance = launch(alice, name="live-one")
    instance.refresh_from_db()
    assert instance.status == "provisioning"
    return alice, instance


def _finish_boot_in_a_worker(instance) -> None:
    """The provider finishes the boot and a worker's poll notices, in a thread of its own (as a
    worker process would be: the test's thread runs Playwright's event loop)."""
    from instances.services import instance_sync
    from providers.simulated.models import SimulatedMachine

    def worker():
        from django.db import connection

        try:
            SimulatedMachine.objects.filter(key=str(instance.pk)).update(ready_at=timezone.now() - timedelta(seconds=1))
            instance_sync(instance_id=instance.pk)
        finally:
            connection.close()

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(timeout=30)


def test_without_a_websocket_a_busy_instance_page_polls_until_it_settles(asgi_server, settings):
    from playwright.sync_api import expect, sync_playwright

    settings.CONSOLE_LIVE_FALLBACK_POLL_S = 1  # the poll is what is tested: no need to wait 4 s for it
    alice, instance = _booting_instance(settings)
    client = Client()
    client.force_login(alice)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            context = browser.new_context()
            context.add_init_script("delete window.WebSocket;")  # a proxy that drops WebSockets
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": asgi_server}])
            page = context.new_page()
            page.goto(f"{asgi_server}/instances/{instance.pk}/")
            badge = page.locator("#instance-body h1 .badge")
            expect(badge).to_have_text("Provisioning")
            _finish_boot_in_a_worker(instance)
            expect(badge).to_have_text("Running", timeout=60_000)
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


def test_the_instance_page_follows_provisioning_to_running_live(asgi_server, settings, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    # No fallback poll within the test's time: Running can only arrive over the live socket.
    settings.CONSOLE_LIVE_FALLBACK_POLL_S = 3600
    alice, instance = _booting_instance(settings)
    client = Client()
    client.force_login(alice)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's loop runs in this thread; see tests/browser
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            context = browser.new_context()
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": asgi_server}])
            page = context.new_page()
            page.set_default_timeout(15_000)

            page.goto(f"{asgi_server}/instances/{instance.pk}/")
            badge = page.locator("#instance-body h1 .badge")
            expect(badge).to_have_text("Provisioning")
            expect(page.locator("html")).to_have_attribute("data-live", "on")
            page.screenshot(path=str(tmp_path / "provisioning.png"), full_page=True)

            list_page = context.new_page()
            list_page.goto(f"{asgi_server}/instances/")
            expect(list_page.locator(f"#instance-{instance.pk} .badge")).to_have_text("Provisioning")
            expect(list_page.locator("html")).to_have_attribute("data-live", "on")

            _finish_boot_in_a_worker(instance)

            expect(badge).to_have_text("Running")
            expect(page.get_by_text("Booted on")).to_be_visible()
            expect(list_page.locator(f"#instance-{instance.pk} .badge")).to_have_text("Running")
            page.screenshot(path=str(tmp_path / "running.png"), full_page=True)
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous
