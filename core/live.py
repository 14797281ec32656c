"""Send live events to a user's browsers (see ``console.consumers``)."""

from __future__ import annotations

import asyncio
import logging
import os
import threading

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)


def user_group(user_id: int) -> str:
    """The Channels group of one user's browser tabs (console.consumers subscribes each socket to it)."""
    return f"user.{user_id}"


_loop: asyncio.AbstractEventLoop | None = None
_outbox: asyncio.Queue | None = None
_sender: asyncio.Task | None = None  # held, so the loop's only reference is not a weak one
_loop_pid = 0
_loop_lock = threading.Lock()


def _background_outbox() -> tuple[asyncio.AbstractEventLoop, asyncio.Queue]:
    """One event loop per process, kept running in a daemon thread, and the queue of pushes it sends.

    ``async_to_sync`` would start a fresh loop for every call, and channels_redis keeps its Redis
    connections per loop, so each push would connect anew (10-25 ms). On one long-lived loop the
    connections are reused and a push costs about a millisecond. The request or task that changed
    something does not wait for it: it puts the push in the queue, and one sender sends them in the
    order they were put (a page must not hear "provisioning" after "running").
    """
    global _loop, _outbox, _sender, _loop_pid
    with _loop_lock:
        # A forked child (Celery's prefork pool) inherits the objects but not the thread running them.
        if _loop is None or _loop.is_closed() or _loop_pid != os.getpid():
            loop = asyncio.new_event_loop()
            outbox = asyncio.Queue()
            _sender = loop.create_task(_send_in_order(outbox))
            threading.Thread(target=loop.run_forever, name="live-notify", daemon=True).start()
            _loop, _outbox, _loop_pid = loop, outbox, os.getpid()
    return _loop, _outbox


async def _send_in_order(outbox: asyncio.Queue) -> None:
    while True:
        layer, group, message = await outbox.get()
        try:
            await asyncio.wait_for(layer.group_send(group, message), timeout=5)
        except Exception:  # best effort: the page shows the truth on its next load
            logger.warning("live push to %s failed", group, exc_info=True)


def notify_user(*, user_id: int, payload: dict) -> None:
    """Best effort: a page that misses an event still shows the truth on its next load."""
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": "user.event", "payload": payload}
    if type(layer).__module__.startswith("channels_redis"):
        loop, outbox = _background_outbox()
        loop.call_soon_threadsafe(outbox.put_nowait, (layer, user_group(user_id), message))
        return
    # The in-memory layer lives in the loop of the process's consumers: no background loop there.
    async_to_sync(layer.group_send)(user_group(user_id), message)
