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
        return (await self.app.receive_output(30))["type"] == "websocket.accept"

    async def receive_json(self) -> dict:
        return json.loads((await self.app.receive_output(30))["text"])

    async def receive_nothing(self) -> bool:
        return await self.app.receive_nothing(0.2)

    async def disconnect(self) -> None:
        await self.app.send_input({"type": "websocket.disconnect", "code": 1000})
        await self.app.wait(30)


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


def test_a_team_instances_changes_reach_members_acting_in_the_team(alice, bob, charlie, catalogue):
    from teams.context import SESSION_KEY
    from teams.models import Membership, Role
    from teams.services import team_create

    team = team_create(user=alice, name="Lab")
    fund(team.account, 1_000_000)
    Membership.objects.create(team=team, user=bob, role=Role.MEMBER)
    instance = running(team.account, actor=alice)

    def stop():
        with committed():
            instance_stop(instance=instance, actor=alice)

    async def scenario():
        bob_ws, bob_personal, charlie_ws = Browser(bob), Browser(bob), Browser(charlie)
        bob_ws.app.scope["session"] = {SESSION_KEY: team.pk}
        charlie_ws.app.scope["session"] = {SESSION_KEY: team.pk}  # not a member: the session's team is ignored
        for ws in (bob_ws, bob_personal, charlie_ws):
            assert await ws.connect()
        await sync_to_async(stop)()
        seen = await bob_ws.receive_json()
        assert await bob_personal.receive_nothing()
        assert await charlie_ws.receive_nothing()
        for ws in (bob_ws, bob_personal, charlie_ws):
            await ws.disconnect()
        return seen

    seen = async_to_sync(scenario)()
    assert (seen["type"], seen["id"]) == ("instance", str(instance.pk))
