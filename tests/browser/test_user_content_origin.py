"""The isolation CONSOLE_PROXY_HOST buys, seen by a real browser: a page served from inside an instance
(a user's own port, as a notebook's output would be) cannot call the console's API with the user's
session, nor read the console's cookies. The same call from a console page succeeds, so the test can fail.

Hosts: the console at localhost:PORT, user content at apps.localhost:PORT (Chromium resolves every
subdomain of localhost to the loopback address; no DNS needed).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.test import Client

from core.proxy import ProxyTarget
from instances.catalogue import catalogue_seed
from instances.tests.conftest import backends, fund, running
from instances.tests.local_helpers import asgi_server, free_port
from ports.services import port_declare
from providers.simulated.backend import SimulatedBackend

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
PROBE = """<!doctype html><title>notebook output</title><script>
(async () => {
  const out = {cookie: document.cookie};
  try {
    const r = await fetch("CONSOLE/api/v1/account/profile/", {credentials: "include"});
    out.api = "status " + r.status + " " + (await r.text()).slice(0, 80);
  } catch (e) { out.api = "blocked"; }
  window.result = out;
})();
</script>"""


def _user_server(console_origin: str) -> tuple[ThreadingHTTPServer, int]:
    page = PROBE.replace("CONSOLE", console_origin).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args):
            pass

    port = free_port()
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, port


@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} does not exist (make browser-deps)")
def test_user_content_cannot_use_the_console_session(alice, settings, monkeypatch):
    from playwright.sync_api import sync_playwright

    settings.PROVISIONING_BACKENDS = backends()
    monkeypatch.setattr(
        SimulatedBackend,
        "port_target",
        lambda self, *, key, port: ProxyTarget(host="127.0.0.1", port=port, strip_prefix=True),
        raising=False,
    )
    catalogue_seed()
    fund(alice, 1_000_000)
    instance = running(alice, name="notebook")
    with asgi_server() as url:
        web_port = int(url.rsplit(":", 1)[1])
        console = f"http://localhost:{web_port}"
        settings.CONSOLE_PROXY_HOST = f"apps.localhost:{web_port}"
        server, user_port = _user_server(console)
        port_declare(instance=instance, port=user_port)
        client = Client()
        client.force_login(alice)
        session = client.cookies[settings.SESSION_COOKIE_NAME].value
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            try:
                context = browser.new_context()
                context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": console}])
                page = context.new_page()
                # From a console page, the session works: the probe below is able to see a success.
                page.goto(f"{console}/dashboard/")
                own = page.evaluate(
                    "async () => (await fetch('/api/v1/account/profile/', {credentials: 'include'})).status"
                )
                assert own == 200

                page.goto(f"{console}/open/?next=/i/{instance.pk}/p{user_port}/")
                assert page.url.startswith(f"http://apps.localhost:{web_port}/i/{instance.pk}/p{user_port}/")
                page.wait_for_function("window.result !== undefined", timeout=15_000)
                result = page.evaluate("window.result")
            finally:
                browser.close()
        server.shutdown()
    assert settings.SESSION_COOKIE_NAME not in result["cookie"]
    assert "console_content" not in result["cookie"]  # HttpOnly: not even its own sign-in cookie
    assert result["api"] == "blocked" or "401" in result["api"] or "403" in result["api"], result
