"""Status changes reach the owner's browsers over the WebSocket, and nobody else's."""

import json

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from asgiref.testing import ApplicationCommunicator

from console.consumers import UserEventsConsumer
from instances.services import instance_stop
from instances.tests.conftest import committed, fund, running

# The consumer closes stale connections between messages, as Channels does: the test's data must be
# committed, not held in a test transaction.
pytestmark = pytest.mark.django_db(transaction=True)


class Browser:
    """A WebSocket client speaking ASGI to the consumer (channels.testing needs daphne, absent here)."""

    def __init__(self, user) -> None:
        scope = {"type": "websocket", "path": "/ws/events/", "user": user, "headers": [], "subprotocols": []}
        self.app = ApplicationCommunicator(UserEventsConsumer.as_asgi(), scope)

    async def connect(self) -> bool:
        await self.app.send_input({"type": "websocket.connect"})
        return (await self.app.receive_output(2))["type"] == "websocket.accept"

    async def receive_json(self) -> dict:
        return json.loads((await self.app.receive_output(2))["text"])

    async def receive_nothing(self) -> bool:
        return await self.app.receive_nothing(0.2)

    async def disconnect(self) -> None:
        await self.app.send_input({"type": "websocket.disconnect", "code": 1000})
        await self.app.wait(1)


def test_a_status_change_is_pushed_to_the_owner_only(rich_alice, charlie):
    fund(charlie, 100_000)
    instance = running(rich_alice)

    def stop():
        with committed():
            instance_stop(instance=instance)

    async def scenario():
        alice_ws, charlie_ws = Browser(rich_alice), Browser(charlie)
        assert await alice_ws.connect()
        assert await charlie_ws.connect()
        await sync_to_async(stop)()
        seen = [await alice_ws.receive_json(), await alice_ws.receive_json()]
        assert await charlie_ws.receive_nothing()
        await alice_ws.disconnect()
        await charlie_ws.disconnect()
        return seen

    seen = async_to_sync(scenario)()
    assert [(m["type"], m["id"], m["status"]) for m in seen] == [
        ("instance", str(instance.pk), "stopping"),
        ("instance", str(instance.pk), "stopped"),
    ]
