"""Streaming through the proxy: a response that never ends stops when the browser goes away, even while
the upstream is silent (a long poll), instead of holding a task and a connection until it next writes."""

from __future__ import annotations

import asyncio
import threading

import pytest
import uvicorn

from console.hooks import proxy_target
from console.reverse_proxy import ProxyTarget, proxy_http
from providers.local.tests.local_helpers import free_port, wait_until

UPSTREAM = {}


async def _endless(scope, receive, send):
    """An event stream that sends three events, then holds the line, silent, while anyone listens."""
    listener_gone = asyncio.Event()

    async def watch():
        while (await receive())["type"] != "http.disconnect":
            pass
        listener_gone.set()

    watcher = asyncio.create_task(watch())
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    UPSTREAM["open"] = UPSTREAM.get("open", 0) + 1
    try:
        for _ in range(3):
            await send({"type": "http.response.body", "body": b"data: tick\n\n", "more_body": True})
        await listener_gone.wait()
    finally:
        UPSTREAM["open"] -= 1
        watcher.cancel()


def resolve_to_endless(*, instance_id, service, user):
    return ProxyTarget(host="127.0.0.1", port=UPSTREAM["port"])


@pytest.fixture
def endless_upstream(hooks_override):
    UPSTREAM["port"] = free_port()
    server = uvicorn.Server(
        uvicorn.Config(_endless, host="127.0.0.1", port=UPSTREAM["port"], log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, what="the upstream")
    hooks_override(proxy_target, resolve_to_endless)
    yield
    server.should_exit = True
    thread.join(timeout=5)


class _User:
    is_authenticated = True
    pk = 1


@pytest.mark.django_db
def test_an_endless_response_ends_when_the_browser_disconnects(endless_upstream):
    sent = []
    gone = asyncio.Event()

    async def receive():
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)
        if sum(1 for m in sent if m["type"] == "http.response.body") == 3:
            gone.set()  # the browser closes the tab after three events

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/i/abc/lab/api/events",
        "raw_path": b"/i/abc/lab/api/events",
        "query_string": b"",
        "headers": [(b"host", b"console")],
        "user": _User(),
    }
    # The upstream never ends: the proxy returns only because it heard the browser go.
    asyncio.run(asyncio.wait_for(proxy_http(scope, receive, send), timeout=60))
    assert sent[0]["status"] == 200
    assert b"data: tick" in sent[1]["body"]
    wait_until(lambda: UPSTREAM["open"] == 0, timeout=30, what="the upstream stream to be closed")
