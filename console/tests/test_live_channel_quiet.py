"""A live-status WebSocket on the Redis channel layer survives a quiet spell longer than the layer's
blocking read (5 s), then still delivers: it used to die there, dropping every page's live updates."""

import asyncio
import json
import os

import pytest
from asgiref.sync import sync_to_async
from asgiref.testing import ApplicationCommunicator

from console.consumers import UserEventsConsumer
from console.settings import redis_channel_layer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


@pytest.fixture
def redis_layer(settings):
    import redis
    from channels.layers import channel_layers

    try:
        redis.Redis.from_url(REDIS_URL, socket_timeout=5).ping()
    except Exception:
        pytest.skip(f"Redis is not reachable at {REDIS_URL}")
    settings.CHANNEL_LAYERS = {"default": redis_channel_layer(REDIS_URL)}
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


def test_a_quiet_socket_stays_open_and_still_hears_its_user(redis_layer, alice):
    from core.live import notify_user

    async def scenario() -> dict:
        scope = {"type": "websocket", "path": "/ws/events/", "user": alice, "headers": [], "subprotocols": []}
        socket = ApplicationCommunicator(UserEventsConsumer.as_asgi(), scope)
        await socket.send_input({"type": "websocket.connect"})
        assert (await socket.receive_output(5))["type"] == "websocket.accept"
        await asyncio.sleep(6.5)  # longer than channels_redis's blocking pop
        await sync_to_async(notify_user)(user_id=alice.pk, payload={"type": "instance", "id": "x", "status": "running"})
        message = await socket.receive_output(5)
        await socket.send_input({"type": "websocket.disconnect", "code": 1000})
        await socket.wait(2)
        return json.loads(message["text"])

    assert asyncio.run(scenario()) == {"type": "instance", "id": "x", "status": "running"}
