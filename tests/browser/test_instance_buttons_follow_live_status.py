"""The buttons of an instance follow its live status without a reload: once a stop completes the page
and the list row offer Start, once it runs again Stop and Restart, even when the news arrives in an
awkward order (two events a moment apart, or one sent before the page's socket opened).

As in test_instance_live_status.py: the console under uvicorn in a thread, the Redis channel layer,
and the test playing the worker in threads of its own. The stop task is held (its ``apply_async``
records the call), so the test decides when the worker gets to it.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = Path("/usr/bin/chromium")
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def _redis_up() -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_timeout=5).ping())
    except Exception:
        return False


@pytest.fixture
def console_url(settings):
    """The console's ASGI app (HTTP and the WebSocket) with the channel layer production uses."""
    from console.settings import redis_channel_layer
    from providers.local.tests.local_helpers import asgi_server

    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} does not exist: install Debian's chromium (make browser-deps)")
    if not _redis_up():
        pytest.skip(f"Redis is not reachable at {REDIS_URL}")
    settings.CHANNEL_LAYERS = {"default": redis_channel_layer(REDIS_URL)}
    # No fallback poll within a test's time: what the pages show arrived over the live socket, however
    # long a busy machine takes to deliver it.
    settings.CONSOLE_LIVE_FALLBACK_POLL_S = 3600
    with asgi_server() as url:
        yield url


def _in_a_worker(job) -> None:
    """Run ``job`` in a thread of its own, as a worker process would (this thread runs Playwright's loop)."""

    def run():
        from django.db import connection

        try:
            job()
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30)


@pytest.fixture
def running(settings, monkeypatch):
    """alice's running instance; stop tasks are recorded in ``held_stops`` instead of run."""
    from accounts.tests.factories import UserFactory
    from instances import tasks
    from instances.catalogue import catalogue_seed
    from instances.services import instance_sync
    from instances.tests.conftest import SMALL_FLEET, fund, launch
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
    instance = launch(alice, name="live-buttons")
    SimulatedMachine.objects.filter(key=str(instance.pk)).update(ready_at=timezone.now() - timedelta(seconds=1))
    instance_sync(instance_id=instance.pk)
    instance.refresh_from_db()
    assert instance.status == "running"
    held_stops: list = []
    monkeypatch.setattr(tasks.instance_stop_task, "apply_async", lambda *a, **kw: held_stops.append(a))
    return alice, instance, held_stops


def _open(page: Page, console_url: str, user, path: str, settings) -> None:
    from django.test import Client

    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    page.context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": console_url}])
    page.set_default_timeout(15_000)
    page.goto(console_url + path)


def _stop_finishes(instance) -> None:
    from instances.services import instance_operation_execute

    _in_a_worker(lambda: instance_operation_execute(instance_id=instance.pk, operation="stop"))


def _body_partial(url: str) -> bool:
    return url.endswith("?partial=body")


def _buttons(scope) -> list[str]:
    # "Start without GPU · ¥x/h" beside Start is the no-GPU choice: its price is not a button's name here.
    return [text.strip().split(" · ")[0] for text in scope.locator("button").all_inner_texts()]


def test_after_a_stop_the_page_and_the_list_offer_start_and_after_a_start_stop_again(
    console_url, running, page: Page, settings, screenshot_dir
):
    alice, instance, held_stops = running
    _open(page, console_url, alice, f"/instances/{instance.pk}/", settings)
    header = page.locator("#instance-body .page-header")
    expect(page.locator("html")).to_have_attribute("data-live", "on")
    assert _buttons(header) == ["Stop", "Restart", "Release"]

    header.get_by_role("button", name="Stop").click()
    expect(header.locator(".badge")).to_have_text("Stopping")
    expect(page.locator("html")).to_have_attribute("data-live", "on")
    assert _buttons(header) == ["Release"]
    assert len(held_stops) == 1

    list_page = page.context.new_page()
    list_page.goto(console_url + "/instances/")
    row = list_page.locator(f"#instance-{instance.pk}")
    expect(row.locator(".badge")).to_have_text("Stopping")
    expect(list_page.locator("html")).to_have_attribute("data-live", "on")

    _stop_finishes(instance)

    # Over the socket: the fallback poll is an hour away (console_url).
    expect(header.locator(".badge")).to_have_text("Stopped")
    expect(header.get_by_role("button", name="Start", exact=True)).to_be_visible()
    assert _buttons(header) == ["Start", "Start without GPU", "Release"]
    expect(row.locator(".badge")).to_have_text("Stopped")
    expect(row.get_by_role("button", name="Start", exact=True)).to_be_visible()
    expect(row.get_by_role("button", name="Stop")).to_have_count(0)
    page.screenshot(path=str(screenshot_dir / "stopped-live.png"), full_page=True)

    # Start from the list; the instance page follows it to Starting, then (the boot done) to Running.
    row.get_by_role("button", name="Start", exact=True).click()
    expect(header.locator(".badge")).to_have_text("Starting")
    assert _buttons(header) == ["Release"]

    from instances.services import instance_sync
    from providers.simulated.models import SimulatedMachine

    def boot_done():
        SimulatedMachine.objects.filter(key=str(instance.pk)).update(ready_at=timezone.now() - timedelta(seconds=1))
        instance_sync(instance_id=instance.pk)

    _in_a_worker(boot_done)
    expect(header.locator(".badge")).to_have_text("Running")
    assert _buttons(header) == ["Stop", "Restart", "Release"]
    expect(row.get_by_role("button", name="Stop")).to_be_visible()
    page.screenshot(path=str(screenshot_dir / "running-again-live.png"), full_page=True)


def test_a_stop_completing_while_the_first_refresh_is_on_its_way_still_shows_start(
    console_url, running, page: Page, settings
):
    """Stopping, then stopped a moment later: the second event lands while the partial for the first
    is still on its way, and must not be lost when that partial replaces the element."""
    from instances.models import Instance
    from instances.services import instance_stop

    alice, instance, _ = running
    page.add_init_script(RECORD_SOCKET_MESSAGES)
    _open(page, console_url, alice, f"/instances/{instance.pk}/", settings)
    header = page.locator("#instance-body .page-header")
    expect(page.locator("html")).to_have_attribute("data-live", "on")

    # Hold the first partial the page asks for (it says "Stopping") until the stop has completed.
    held = []

    def hold_the_first(route):
        if held:
            route.continue_()
        else:
            held.append((route, route.fetch()))

    page.route(_body_partial, hold_the_first)
    _in_a_worker(lambda: instance_stop(instance=Instance.objects.get(pk=instance.pk)))
    deadline = time.monotonic() + 30
    while not held and time.monotonic() < deadline:
        page.wait_for_timeout(50)
    assert held, "the page did not ask for its partial after the Stopping event"
    _stop_finishes(instance)
    # The Stopped event reaches the page while its first request is still held.
    page.wait_for_function(
        "() => window.__heard.map((d) => JSON.parse(d)).some((m) => m.type === 'instance' && m.status === 'stopped')"
    )
    route, stale = held[0]
    assert "Stopping" in stale.text()
    route.fulfill(response=stale)

    expect(header.locator(".badge")).to_have_text("Stopped")
    assert _buttons(header) == ["Start", "Start without GPU", "Release"]


# Every message the page's live sockets receive, in window.__heard, so a test can wait for one to arrive.
RECORD_SOCKET_MESSAGES = """
(() => {
  const Real = window.WebSocket;
  window.__heard = [];
  window.WebSocket = class extends Real {
    constructor(url, protocols) {
      super(url, protocols);
      this.addEventListener("message", (event) => window.__heard.push(event.data));
    }
  };
})();
"""

# The page's socket opens only when the test says so: what happens before, the page cannot hear.
HOLD_SOCKETS = """
(() => {
  const Real = window.WebSocket;
  let release;
  const released = new Promise((resolve) => { release = resolve; });
  window.__releaseSockets = () => release();
  window.WebSocket = function (url, protocols) {
    const shim = {};
    released.then(() => {
      const real = new Real(url, protocols);
      real.onopen = (e) => shim.onopen && shim.onopen(e);
      real.onmessage = (e) => shim.onmessage && shim.onmessage(e);
      real.onclose = (e) => shim.onclose && shim.onclose(e);
    });
    return shim;
  };
})();
"""


def test_a_stop_completing_before_the_page_s_socket_opens_still_shows_start(console_url, running, page: Page, settings):
    from instances.models import Instance
    from instances.services import instance_stop

    alice, instance, _ = running
    _in_a_worker(lambda: instance_stop(instance=Instance.objects.get(pk=instance.pk)))
    page.add_init_script(HOLD_SOCKETS)
    _open(page, console_url, alice, f"/instances/{instance.pk}/", settings)
    header = page.locator("#instance-body .page-header")
    expect(header.locator(".badge")).to_have_text("Stopping")

    _stop_finishes(instance)  # its event goes to nobody: the page has no socket yet
    page.evaluate("window.__releaseSockets()")
    expect(page.locator("html")).to_have_attribute("data-live", "on")
    # The socket has switched polling off (and the poll is an hour away): only a catch-up helps.
    expect(header.locator(".badge")).to_have_text("Stopped")
    assert _buttons(header) == ["Start", "Start without GPU", "Release"]
