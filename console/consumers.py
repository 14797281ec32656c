"""Live updates pushed to the browser.

Each logged-in user has one group, ``user.<id>``; services send events to it with
``core.live.notify_user`` and the page swaps in the partial it names. A stranger cannot join
another user's group: the group comes from the session, never from the URL.
"""

from __future__ import annotations

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from core.live import user_group


class UserEventsConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        self.group = user_group(user.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: dict, **kwargs) -> None:
        # The channel is server-to-browser only; anything the browser sends is ignored.
        return None

    async def user_event(self, event: dict) -> None:
        await self.send_json(event["payload"])
