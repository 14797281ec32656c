"""With every speed-up turned off (``core.speedups``) the console works on stock Django and kombu alone.

The API answers through Django's own ASGI handler (not ``console.handlers``), a launch goes through
the ORM's statements (not ``core.sql``), its status reaches the owner's browser over the WebSocket,
and Celery's broker is kombu's own Redis transport (not ``console.broker``). The same scenario runs
with the speed-ups on, so both paths are held to one behaviour.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import secrets

import pytest
from asgiref.sync import async_to_sync
from django.core.handlers.asgi import ASGIHandler
from kombu import Connection
from kombu.transport import redis as kombu_redis

from accounts.authentication import token_digest
from accounts.models import APIToken
from console import broker
from console.handlers import LaneASGIHandler, django_asgi_handler
from core import speedups, sql
from instances.catalogue import catalogue_seed
from instances.models import Instance
from instances.tests.conftest import fund
from instances.tests.test_live_status import Browser

pytestmark = pytest.mark.django_db(transaction=True)  # the WebSocket consumer reads committed rows

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


@pytest.fixture(params=[False, True], ids=["fallbacks", "speedups"])
def speedups_on(request, settings):
    """Every speed-up off (or on), decided afresh, and ``console.broker``'s transport chosen again."""
    original = dict(settings.CONSOLE_SPEEDUPS)
    settings.CONSOLE_SPEEDUPS = dict.fromkeys(speedups.SPEEDUPS, request.param)
    speedups.decision.cache_clear()
    importlib.reload(broker)
    yield request.param
    settings.CONSOLE_SPEEDUPS = original
    speedups.decision.cache_clear()
    importlib.reload(broker)


@pytest.fixture
def rich_alice(alice):
    catalogue_seed()
    fund(alice, 1_000_000)
    return alice


async def _call(handler, method: str, url: str, token: str, body: dict | None = None) -> tuple[int, dict]:
    """One HTTP request through the ASGI ``handler``, as uvicorn would pass it."""
    payload = json.dumps(body).encode() if body is not None else b""
    sent: list[dict] = []
    delivered = asyncio.Event()

    async def receive() -> dict:
        if not delivered.is_set():
            delivered.set()
            return {"type": "http.request", "body": payload, "more_body": False}
        await asyncio.Event().wait()  # connected until the answer is sent (the handler cancels this)
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": url,
        "raw_path": url.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"testserver"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
            (b"authorization", f"Bearer {token}".encode()),
        ],
        "client": ("127.0.0.1", 40000),
        "server": ("testserver", 80),
    }
    await handler(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    return start["status"], json.loads(b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"))


def test_the_api_a_launch_and_its_live_status_work_with_every_fallback(speedups_on, rich_alice):
    raw = "gpuc_" + secrets.token_urlsafe(32)
    APIToken.objects.create(user=rich_alice, name="fallback", prefix=raw[:12], digest=token_digest(raw))
    handler = django_asgi_handler()
    assert type(handler) is (LaneASGIHandler if speedups_on else ASGIHandler)
    assert sql.enabled() is speedups_on

    async def scenario() -> tuple[int, dict, list[dict], int]:
        listed_status, listed = await _call(handler, "GET", "/api/v1/instances/", raw)
        assert (listed_status, listed["results"]) == (200, [])
        browser = Browser(rich_alice)
        assert await browser.connect()
        status, launched = await _call(
            handler,
            "POST",
            "/api/v1/instances/",
            raw,
            {"region": "cn-north-1", "gpu_model": "a800-80g", "gpu_count": 1, "image": "pytorch-2.5-cu124"},
        )
        seen = []
        while status == 201 and not any(m.get("status") == "running" for m in seen) and len(seen) < 10:
            seen.append(await browser.receive_json())
        await browser.disconnect()
        return status, launched, seen, listed_status

    status, launched, seen, _ = async_to_sync(scenario)()
    assert status == 201, launched
    assert (seen[-1]["type"], seen[-1]["id"], seen[-1]["status"]) == ("instance", launched["id"], "running")
    assert Instance.objects.get(pk=launched["id"]).status == "running"
    assert Instance.objects.get(pk=launched["id"]).events.filter(new="running").count() == 1


def test_celery_s_broker_is_kombu_s_own_transport_with_the_fallback(speedups_on):
    assert broker.Transport is (broker.OneClientTransport if speedups_on else kombu_redis.Transport)
    try:
        # (the class itself: kombu caches what a name resolved to, and this process resolved it already)
        with Connection(REDIS_URL, transport=broker.Transport) as connection:
            queue = connection.SimpleQueue(f"speedups-fallback-{secrets.token_hex(4)}")
            try:
                queue.put({"launch": 1})
                message = queue.get(timeout=30)
                message.ack()
                assert message.payload == {"launch": 1}
                assert type(connection.default_channel) is (broker.Channel if speedups_on else kombu_redis.Channel)
            finally:
                queue.queue.delete()
                queue.close()
    except OSError as exc:  # kombu raises ConnectionError (an OSError) when Redis is not there
        pytest.skip(f"Redis at {REDIS_URL} is not reachable: {exc}")
