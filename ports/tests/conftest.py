"""A user's own HTTP and WebSocket server "on" an instance, and the console under uvicorn in front of it.

The simulated cloud runs no machines, so its machines' ports are taken to be this host's (as the local
backend's are): ``port_target`` is pointed here for the tests, and a real server listens on the port.
"""

from __future__ import annotations

import asyncio
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from websockets.asyncio.server import serve

from core.user_content import ProxyTarget
from instances.catalogue import catalogue_seed
from instances.tests.conftest import backends, fund, running
from providers.local.tests.local_helpers import asgi_server, free_port
from providers.simulated.backend import SimulatedBackend


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"path={self.path} cookie={self.headers.get('Cookie', '')}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def user_server():
    """An HTTP server on a free port; WebSocket on the port after it. Yields the HTTP port."""
    port = free_port()
    http = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    yield port
    http.shutdown()
    http.server_close()


@pytest.fixture
def ws_server():
    """A WebSocket echo server on a free port, in a thread of its own; yields the port."""
    port = free_port()
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    stop = asyncio.Event()

    async def echo(connection):
        async for message in connection:
            await connection.send(f"echo {message} from {connection.request.path}")

    async def main():
        async with serve(echo, "127.0.0.1", port):
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    ready.wait(10)
    yield port
    loop.call_soon_threadsafe(stop.set)
    thread.join(5)


@pytest.fixture(autouse=True)
def simulated_here(settings, monkeypatch):
    settings.PROVISIONING_BACKENDS = backends()
    settings.INSTANCES_REDRIVE_AFTER_S = 0
    monkeypatch.setattr(
        SimulatedBackend,
        "port_target",
        lambda self, *, key, port: ProxyTarget(host="127.0.0.1", port=port, strip_prefix=True),
        raising=False,
    )


@pytest.fixture
def console_url(transactional_db):
    with asgi_server() as url:
        yield url


@pytest.fixture
def alice_instance(alice, transactional_db):
    catalogue_seed()
    fund(alice, 1_000_000)
    instance = running(alice, name="train")
    assert instance.status == "running"
    return instance
