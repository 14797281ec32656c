"""A share link is a stranger's page: opened by someone signed in to the console, its script must get
nothing of the console. With the development default (user content at ``<label>.apps.localhost:PORT``,
settings.DEVELOPMENT_CONTENT_HOST), the share link's URL on the console's own host only redirects to
the instance's host; there, the page's script finds no console cookie, and cannot read the console's
API nor mint an API token with the visitor's session. A console page's same calls work, so the probe
can tell.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.test import Client

from accounts.models import APIToken
from console.settings import DEVELOPMENT_CONTENT_HOST
from core.user_content import ProxyTarget, content_host
from instances.catalogue import catalogue_seed
from instances.tests.conftest import backends, fund, running
from ports.services import port_declare, share_create
from providers.local.tests.local_helpers import asgi_server, free_port
from providers.simulated.backend import SimulatedBackend

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
# The shared page: what its author's script tries against whoever opens it.
PROBE = """<!doctype html><title>shared</title><body><script>
(async () => {
  const out = {cookie: document.cookie};
  try {
    const r = await fetch("CONSOLE/api/v1/account/profile/", {credentials: "include"});
    out.profile = "status " + r.status + " " + (await r.text()).slice(0, 80);
  } catch (e) { out.profile = "blocked"; }
  try {
    const r = await fetch("CONSOLE/api/v1/account/tokens/", {
      method: "POST", credentials: "include", body: new URLSearchParams({name: "stolen"}),
    });
    out.mint = "status " + r.status + " " + (await r.text()).slice(0, 80);
  } catch (e) { out.mint = "blocked"; }
  window.result = out;
})();
</script></body>"""


def _author_server(page: dict[str, str]) -> tuple[ThreadingHTTPServer, int]:
    """The shared page's server; it serves ``page["html"]`` (set once the console's address is known)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = page["html"].encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    port = free_port()
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, port


@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} does not exist (make browser-deps)")
def test_a_share_link_cannot_use_the_visitors_console_session(alice, bob, settings, monkeypatch):
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
    instance = running(alice, name="shared")
    page_html: dict[str, str] = {}
    server, author_port = _author_server(page_html)
    share = share_create(port=port_declare(instance=instance, port=author_port))
    client = Client()
    client.force_login(bob)  # the visitor: signed in to the console, opening alice's link
    session = client.cookies[django_settings.SESSION_COOKIE_NAME].value
    try:
        with asgi_server() as url:
            web_port = int(url.rsplit(":", 1)[1])
            console = f"http://localhost:{web_port}"
            settings.CONSOLE_PROXY_HOST = DEVELOPMENT_CONTENT_HOST.format(port=web_port)  # make run's
            page_html["html"] = PROBE.replace("CONSOLE", console)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
                try:
                    context = browser.new_context()
                    context.add_cookies(
                        [{"name": django_settings.SESSION_COOKIE_NAME, "value": session, "url": console}]
                    )
                    page = context.new_page()
                    page.goto(f"{console}/dashboard/")
                    own = page.evaluate("async () => (await fetch('/api/v1/account/profile/')).status")
                    assert own == 200  # on the console's own page the session works

                    page.goto(f"{console}{share.path}")  # the link as the console's host would serve it
                    assert page.url.startswith(f"http://{content_host(instance.pk)}{share.path}"), page.url
                    page.wait_for_function("window.result !== undefined", timeout=20_000)
                    result = page.evaluate("window.result")
                finally:
                    browser.close()
    finally:
        server.shutdown()
        server.server_close()
    assert django_settings.SESSION_COOKIE_NAME not in result["cookie"], result
    assert django_settings.CSRF_COOKIE_NAME not in result["cookie"], result
    assert result["profile"] == "blocked" or result["profile"].split()[1] in ("401", "403"), result
    assert bob.email not in str(result)
    assert result["mint"] == "blocked" or result["mint"].split()[1] in ("401", "403"), result
    assert not APIToken.objects.filter(user=bob).exists()
