"""Send live events to a user's browsers (see ``console.consumers``)."""

from __future__ import annotations

import asyncio
import os
import threading

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer


def user_group(user_id: int) -> str:
    """The Channels group of one user's browser tabs (console.consumers subscribes each socket to it)."""
    return f"user.{user_id}"


_loop: asyncio.AbstractEventLoop | None = None
_loop_pid = 0
_loop_lock = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    """One event loop per process, kept running in a daemon thread.

    ``async_to_sync`` would start a fresh loop for every call, and channels_redis keeps its Redis
    connections per loop, so each push would connect anew (10-25 ms). On one long-lived loop the
    connections are reused and a push costs about a millisecond.
    """
    global _loop, _loop_pid
    with _loop_lock:
        # A forked child (Celery's prefork pool) inherits the object but not the thread running it.
        if _loop is None or _loop.is_closed() or _loop_pid != os.getpid():
            _loop, _loop_pid = asyncio.new_event_loop(), os.getpid()
            threading.Thread(target=_loop.run_forever, name="live-notify", daemon=True).start()
    return _loop


def notify_user(*, user_id: int, payload: dict) -> None:
    """Best effort: a page that misses an event still shows the truth on its next load."""
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": "user.event", "payload": payload}
    if type(layer).__module__.startswith("channels_redis"):
        future = asyncio.run_coroutine_threadsafe(layer.group_send(user_group(user_id), message), _background_loop())
        future.result(timeout=5)
        return
    # The in-memory layer lives in the loop of the process's consumers: no background loop there.
    async_to_sync(layer.group_send)(user_group(user_id), message)
