"""The isolation CONSOLE_PROXY_HOST buys, seen by a real browser: a page served from inside an instance
(a user's own port, as a notebook's output would be) cannot call the console's API with the user's
session, nor read the console's cookies; nor can it read another instance's content or cookies, since
each instance has an origin of its own (``<label>.<CONSOLE_PROXY_HOST>``). The same calls from a console
page, and from the other instance's own page, succeed, so the test can fail.

Hosts: the console at localhost:PORT, each instance's content at <label>.apps.localhost:PORT (Chromium
resolves every subdomain of localhost to the loopback address; no DNS needed).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.test import Client

from core.user_content import ProxyTarget, content_host
from instances.catalogue import catalogue_seed
from instances.tests.conftest import backends, fund, running
from ports.services import port_declare
from providers.local.tests.local_helpers import asgi_server, free_port
from providers.simulated.backend import SimulatedBackend

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
# Instance A's page: what a notebook's output could try against the console and against instance B.
PROBE = """<!doctype html><title>notebook output</title><body><script>
(async () => {
  const out = {cookie: document.cookie};
  try {
    const r = await fetch("CONSOLE/api/v1/account/profile/", {credentials: "include"});
    out.api = "status " + r.status + " " + (await r.text()).slice(0, 80);
  } catch (e) { out.api = "blocked"; }
  try {
    const r = await fetch("OTHER", {credentials: "include"});
    out.other = "status " + r.status + " " + (await r.text()).slice(0, 80);
  } catch (e) { out.other = "blocked"; }
  out.frame = await new Promise((resolve) => {
    const frame = document.createElement("iframe");
    frame.src = "OTHER";
    frame.onload = () => {
      try {
        resolve("read: " + frame.contentDocument.body.innerText + " cookie=" + frame.contentDocument.cookie);
      } catch (e) { resolve("blocked"); }
    };
    setTimeout(() => resolve("no load"), 10000);
    document.body.appendChild(frame);
  });
  window.result = out;
})();
</script></body>"""
SECRET = "the secret of instance B"
# Instance B's page: its content, and a cookie its own scripts may read (not HttpOnly).
OTHER_PAGE = f"<!doctype html><title>B</title><body>{SECRET}</body>"


def _user_server(page: str, *, cookie: str = "") -> tuple[ThreadingHTTPServer, int]:
    body = page.encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            if cookie:
                self.send_header("Set-Cookie", cookie)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    port = free_port()
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, port


@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} does not exist (make browser-deps)")
def test_user_content_cannot_use_the_console_session_nor_another_instances_content(alice, settings, monkeypatch):
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
    first = running(alice, name="notebook")
    second = running(alice, name="private")
    with asgi_server() as url:
        web_port = int(url.rsplit(":", 1)[1])
        console = f"http://localhost:{web_port}"
        settings.CONSOLE_PROXY_HOST = f"apps.localhost:{web_port}"
        other_server, other_port = _user_server(OTHER_PAGE, cookie="b_secret=s3cret; Path=/")
        other_path = f"/i/{second.pk}/p{other_port}/"
        other_url = f"http://{content_host(second.pk)}{other_path}"
        probe = PROBE.replace("CONSOLE", console).replace("OTHER", other_url)
        server, user_port = _user_server(probe)
        port_declare(instance=first, port=user_port)
        port_declare(instance=second, port=other_port)
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

                # Instance B, opened from the console: signed in on its own host, its cookie set there, and
                # its own page reads both (so the probe on A is able to see a success).
                page.goto(f"{console}/open/?next={other_path}")
                assert page.url.startswith(other_url)
                assert SECRET in page.content()
                assert "b_secret=s3cret" in page.evaluate("document.cookie")
                same_origin = page.evaluate(f"async () => (await (await fetch('{other_path}')).text())")
                assert SECRET in same_origin

                # Instance A, opened from the console: its page tries the console and instance B.
                page.goto(f"{console}/open/?next=/i/{first.pk}/p{user_port}/")
                assert page.url.startswith(f"http://{content_host(first.pk)}/i/{first.pk}/p{user_port}/")
                assert content_host(first.pk) != content_host(second.pk)
                page.wait_for_function("window.result !== undefined", timeout=20_000)
                result = page.evaluate("window.result")
            finally:
                browser.close()
        server.shutdown()
        other_server.shutdown()
    assert settings.SESSION_COOKIE_NAME not in result["cookie"]
    assert "console_content" not in result["cookie"]  # HttpOnly: not even its own sign-in cookie
    assert "b_secret" not in result["cookie"], result  # B's cookie stays on B's host
    assert result["api"] == "blocked" or "401" in result["api"] or "403" in result["api"], result
    # B's content is another origin's: a credentialed fetch is refused by CORS, a frame cannot be read.
    assert result["other"] == "blocked", result
    assert not result["frame"].startswith("read:"), result
    assert SECRET not in str(result)
