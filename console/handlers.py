"""Django's ASGI handler, serving each request's synchronous part on a fixed set of threads.

Django's own handler opens a ``ThreadSensitiveContext`` for every request, and asgiref gives each such
context a new one-thread executor: every request started a thread, built that thread's database
wrapper from nothing (Django's connections are per thread), borrowed a pooled connection for it and,
at the end, joined the thread from yet another thread. On a console whose requests are short (an API
launch is a few milliseconds of Python), that was a large share of the web process's CPU.

Here each request borrows a *lane*, a one-thread executor that lives as long as the process, and runs
in a ``ThreadSensitiveContext`` bound to it (asgiref's supported form: "an executor has been given").
Everything thread-sensitive in the request (the middleware chain and the view: one hop, see
``core.middleware.SynchronousChain``) runs on the lane's thread, as under a threaded WSGI server; a
request that waits on something slow holds one lane and the others go on. When every lane is busy a
request waits for one, in the event loop, without a thread. ``WEB_THREADS`` sets how many lanes a
process has.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler


class LaneASGIHandler(ASGIHandler):
    """``django.core.handlers.asgi.ASGIHandler`` with a fixed set of request threads per event loop."""

    def __init__(self) -> None:
        super().__init__()
        self._lanes: dict[asyncio.AbstractEventLoop, asyncio.Queue[ThreadPoolExecutor]] = {}

    def _lanes_for(self, loop: asyncio.AbstractEventLoop) -> asyncio.Queue[ThreadPoolExecutor]:
        """The free lanes of ``loop`` (a server runs one loop per process; tests may run several)."""
        lanes = self._lanes.get(loop)
        if lanes is None:
            lanes = asyncio.Queue()
            for n in range(max(1, settings.WEB_THREADS)):
                lanes.put_nowait(ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"web-{n}"))
            self._lanes[loop] = lanes
        return lanes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":  # as Django's: WebSockets go to Channels (console.asgi)
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        lanes = self._lanes_for(asyncio.get_running_loop())
        lane = await lanes.get()
        try:
            async with ThreadSensitiveContext(executor=lane):
                await self.handle(scope, receive, send)
        finally:
            lanes.put_nowait(lane)
