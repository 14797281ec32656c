"""A webhook receiver on loopback: it records each request and answers from a script of status codes."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from instances.tests.conftest import catalogue, rich_alice, small_fleet  # noqa: F401  (fixtures)


@dataclass
class Receiver:
    url: str
    answers: list[int] = field(default_factory=list)  # status codes, in order; then 200
    requests: list[tuple[dict[str, str], bytes]] = field(default_factory=list)


@pytest.fixture
def receiver(settings):
    """``receiver.url`` accepts POSTs; private addresses are allowed for it (the SSRF guard's setting)."""
    settings.NOTIFICATIONS_WEBHOOK_ALLOW_PRIVATE = True
    state = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            state.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
            code = state.answers.pop(0) if state.answers else 200
            self.send_response(code)
            if 300 <= code < 400:
                self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    yield state
    server.shutdown()
    server.server_close()
