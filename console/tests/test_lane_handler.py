"""The web process's ASGI handler (``console.handlers.LaneASGIHandler``): requests run on a fixed set of
threads that outlive them, more requests than threads wait their turn, and every lane comes back."""

from __future__ import annotations

import asyncio
import threading

import pytest

from console.handlers import LaneASGIHandler


async def _get(handler: LaneASGIHandler, path: str) -> tuple[int, bytes]:
    sent: list[dict] = []
    body_sent = asyncio.Event()

    async def receive() -> dict:
        if not body_sent.is_set():
            body_sent.set()
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.sleep(3600)  # the client stays connected until the response is sent
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 40000),
        "server": ("testserver", 80),
    }
    await handler(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    return start["status"], b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def _lane_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("web-")}


def test_twelve_requests_at_once_share_three_long_lived_threads(settings):
    settings.WEB_THREADS = 3
    handler = LaneASGIHandler()

    async def burst() -> list[tuple[int, bytes]]:
        answers = await asyncio.gather(*(_get(handler, "/healthz") for _ in range(12)))
        lanes = handler._lanes[asyncio.get_running_loop()]
        assert lanes.qsize() == 3  # every lane came back
        return answers

    before = _lane_threads()
    answers = asyncio.run(burst())
    assert [status for status, _body in answers] == [200] * 12
    assert all(b'"ok"' in body for _status, body in answers)
    started = _lane_threads() - before
    assert 1 <= len(started) <= 3  # the requests ran on the lanes, not on a thread each


def test_only_http_is_served():
    with pytest.raises(ValueError, match="websocket"):
        asyncio.run(LaneASGIHandler()({"type": "websocket"}, None, None))
