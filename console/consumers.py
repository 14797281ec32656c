"""Live updates pushed to the browser.

Each logged-in user has one group, ``user.<id>``; services send events to it with
``core.live.notify_user`` and the page swaps in the partial it names. A stranger cannot join
another user's group: the group comes from the session, never from the URL.

In a team's context (the session's acting team) the socket joins the team account's group as well,
for a member whose role shows the team's instances: their status changes are pushed to the account
that owns them. The membership is read when the socket connects; what a push names is fetched over
HTTP, where it is checked again.
"""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from core.live import user_group
from teams.context import SESSION_KEY, acting_context_for
from teams.roles import Permission, membership_can


def _team_group(user, session) -> str | None:
    """The acting team account's group, when the person may see its resources; else None."""
    team_id = session.get(SESSION_KEY) if session is not None else None
    if team_id is None:
        return None
    principal, membership = acting_context_for(user, team_id)
    if membership is None or not membership_can(membership, Permission.RESOURCES_VIEW):
        return None
    return user_group(principal.pk)


class UserEventsConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        self.group = user_group(user.pk)
        team_group = await database_sync_to_async(_team_group)(user, self.scope.get("session"))
        self.joined = [self.group, *([team_group] if team_group else [])]
        for group in self.joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "joined", ()):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive_json(self, content: dict, **kwargs) -> None:
        # The channel is server-to-browser only; anything the browser sends is ignored.
        return None

    async def user_event(self, event: dict) -> None:
        await self.send_json(event["payload"])
