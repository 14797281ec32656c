"""A loopback HTTP server that answers with recorded provider bodies, one per request, in order.

The bodies (``recordings/``) follow the providers' documented answers: their API references' examples
and error codes, with request ids as they print them; no live account was called to make them.

The SDKs run whole (signing, transport, parsing): only the host they talk to is ours. Each request is
kept (``requests``) so a test can see what the SDK sent.
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

RECORDINGS = Path(__file__).parent / "recordings"


def recording(name: str) -> tuple[int, bytes]:
    """A recorded answer: ``recordings/<name>.json`` holds ``{"status": 200, "body": {...}}``."""
    data = json.loads((RECORDINGS / f"{name}.json").read_text())
    body = data["body"]
    return data["status"], (body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)).encode()


@contextmanager
def recorded_server(*answers: tuple[int, bytes]):
    queue = list(answers)
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            seen.append({"path": self.path, "headers": dict(self.headers), "body": self.rfile.read(length)})
            status, body = queue.pop(0) if queue else (500, b"{}")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        server.requests = seen
        yield server
    finally:
        server.shutdown()
        server.server_close()
