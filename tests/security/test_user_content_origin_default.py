"""User content (a share link, a JupyterLab, a port) never runs on the console's origin by default.

Development serves it on a subdomain of localhost; production refuses to start without a host of its
own for it, or with one a script there could use against the console; on the console's host ``/i/…``
only redirects; and nothing proxied may widen a service worker's scope over the instance's other paths.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest
from django.conf import settings

from console.hooks import proxy_target
from console.reverse_proxy import InstanceProxyRouter
from core.user_content import ProxyTarget, content_host

INSTANCE = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
SECRET_KEY = "k" * 20 + "3x9!Qz_vL0pR7mW2sT5yB8nC4dF6gH1jK" + "z" * 10


def settings_of(env: dict[str, str], *names: str) -> subprocess.CompletedProcess:
    """Load the settings in a process of their own with ``env`` (connecting to nothing); print ``names``."""
    inherited = {
        k: v
        for k, v in os.environ.items()
        if k not in {"CONSOLE_PROXY_HOST", "CONSOLE_COOKIE_HOST_PREFIX", "DJANGO_ALLOWED_HOSTS", "CONSOLE_ENV"}
    }
    code = "from django.conf import settings; print(" + ", ".join(f"settings.{n}" for n in names or ("DEBUG",)) + ")"
    return subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=settings.BASE_DIR,
        env={
            **inherited,
            "DJANGO_SETTINGS_MODULE": "console.settings",
            # Named, not reached.
            "DATABASE_URL": "postgres://console@127.0.0.1:5432/console",
            "REDIS_URL": "redis://127.0.0.1:6379/0",
            **env,
        },
        capture_output=True,
        text=True,
        check=False,
    )


def production(**env: str) -> subprocess.CompletedProcess:
    return settings_of(
        {
            "CONSOLE_ENV": "production",
            "DJANGO_SECRET_KEY": SECRET_KEY,
            "DJANGO_ALLOWED_HOSTS": "console.example.com",
            "CONSOLE_DEMO_MODE": "1",
            **env,
        },
        "CONSOLE_PROXY_HOST",
        "SESSION_COOKIE_NAME",
    )


def test_development_serves_user_content_on_a_localhost_subdomain_by_default():
    result = settings_of({"CONSOLE_ENV": "development"}, "CONSOLE_PROXY_HOST")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["apps.localhost:8000"]


def test_make_run_serves_user_content_on_its_own_port():
    from console.run import content_host_default

    env = {"CONSOLE_ENV": "development"}
    content_host_default(env, port=9000)
    assert env["CONSOLE_PROXY_HOST"] == "apps.localhost:9000"
    chosen = {"CONSOLE_ENV": "development", "CONSOLE_PROXY_HOST": "apps.dev.example:9000"}
    content_host_default(chosen, port=9000)
    assert chosen["CONSOLE_PROXY_HOST"] == "apps.dev.example:9000"  # an operator's choice stands


def test_production_refuses_to_start_without_a_user_content_host():
    result = production()
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and "CONSOLE_PROXY_HOST must name a domain" in result.stderr


def test_production_refuses_the_consoles_own_host_for_user_content():
    result = production(CONSOLE_PROXY_HOST="console.example.com")
    assert result.returncode != 0
    assert "must not be the console's own host" in result.stderr


def test_production_refuses_a_subdomain_of_the_console_unless_its_cookies_are_host_prefixed():
    refused = production(CONSOLE_PROXY_HOST="apps.console.example.com", CONSOLE_COOKIE_HOST_PREFIX="0")
    assert refused.returncode != 0
    assert "CONSOLE_COOKIE_HOST_PREFIX" in refused.stderr

    accepted = production(CONSOLE_PROXY_HOST="apps.console.example.com")  # __Host- cookies: on in production
    assert accepted.returncode == 0, accepted.stderr
    assert accepted.stdout.split() == ["apps.console.example.com", "__Host-sessionid"]


def test_production_accepts_a_domain_of_its_own():
    result = production(CONSOLE_PROXY_HOST="console-content.example.net", CONSOLE_COOKIE_HOST_PREFIX="0")
    assert result.returncode == 0, result.stderr


# --- the console's host never serves /i/… when user content has hosts of its own ---------------------------


def asgi_call(app, scope: dict) -> list[dict]:
    """Run one request through an ASGI app; the messages it sent. The client never goes away."""
    sent: list[dict] = []
    first = True

    async def receive():
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()

    async def send(message):
        sent.append(message)

    async def main():
        await asyncio.wait_for(app(scope, receive, send), timeout=30)

    asyncio.run(main())
    return sent


def http_scope(path: str, *, host: str, query: bytes = b"", user=None) -> dict:
    return {
        "type": "http",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "headers": [(b"host", host.encode())],
        "user": user,
    }


def router_answer(path: str, *, host: str = "localhost:8000", query: bytes = b"") -> tuple[int | None, dict]:
    calls: list[str] = []

    async def django(scope, receive, send):
        calls.append(scope["path"])
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    sent = asgi_call(InstanceProxyRouter(django), http_scope(path, host=host, query=query))
    start = next(m for m in sent if m["type"] == "http.response.start")
    assert not calls, "the console's own app answered a proxy path"
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}


def test_a_share_link_on_the_consoles_host_redirects_to_its_instances_host(settings):
    settings.CONSOLE_PROXY_HOST = "apps.localhost:8000"
    share = f"/i/{INSTANCE}/s-{'a' * 32}/notebook.html"
    status, headers = router_answer(share, query=b"x=1")
    assert status == 302
    assert headers["location"] == f"//{content_host(INSTANCE)}{share}?x=1"


def test_a_server_on_the_consoles_host_redirects_through_the_hand_off(settings):
    settings.CONSOLE_PROXY_HOST = "apps.localhost:8000"
    status, headers = router_answer(f"/i/{INSTANCE}/lab/tree")
    assert status == 302
    assert headers["location"] == f"/open/?next=/i/{INSTANCE}/lab/tree"


def test_a_proxy_path_naming_no_instance_is_not_found_on_the_consoles_host(settings):
    settings.CONSOLE_PROXY_HOST = "apps.localhost:8000"
    assert router_answer("/i/not-an-id/lab/")[0] == 404
    assert router_answer("/i/_handoff", query=b"token=x")[0] == 404


# --- Service-Worker-Allowed never comes through ----------------------------------------------------------


@pytest.fixture
def upstream_with_service_worker_scope():
    """A user's server answering a service worker script that asks for the whole host as its scope."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"self.addEventListener('fetch', () => {});"
            self.send_response(200)
            self.send_header("Content-Type", "text/javascript")
            self.send_header("Service-Worker-Allowed", "/")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


UPSTREAM = {}


def resolve_to_upstream(*, instance_id, service, user, api_key=""):
    return ProxyTarget(host="127.0.0.1", port=UPSTREAM["port"], strip_prefix=True)


def test_proxied_responses_never_widen_a_service_workers_scope(
    settings, hooks_override, upstream_with_service_worker_scope
):
    settings.CONSOLE_PROXY_HOST = ""
    hooks_override(proxy_target, resolve_to_upstream)
    UPSTREAM["port"] = upstream_with_service_worker_scope
    from console.reverse_proxy import _proxy_app

    user = SimpleNamespace(is_authenticated=True, pk=1)
    sent = asgi_call(_proxy_app, http_scope(f"/i/{INSTANCE}/lab/sw.js", host="localhost:8000", user=user))
    start = next(m for m in sent if m["type"] == "http.response.start")
    headers = {k.decode().lower() for k, _ in start["headers"]}
    assert start["status"] == 200
    assert "content-type" in headers  # the upstream's answer did come through
    assert "service-worker-allowed" not in headers
