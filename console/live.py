"""Send live events to a user's browsers (see ``console.consumers``)."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from console.consumers import user_group


def notify_user(*, user_id: int, payload: dict) -> None:
    """Best effort: a page that misses an event still shows the truth on its next load."""
    layer = get_channel_layer()
    if layer is None:
        return
    async_to_sync(layer.group_send)(user_group(user_id), {"type": "user.event", "payload": payload})
