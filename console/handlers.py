"""Django's ASGI handler, serving each request's synchronous part on a fixed set of threads.

Django's own handler opens a ``ThreadSensitiveContext`` for every request, and asgiref gives each such
context a new one-thread executor: every request started a thread, built that thread's database
wrapper from nothing (Django's connections are per thread), borrowed a pooled connection for it and,
at the end, joined the thread from yet another thread. On a console whose requests are short (an API
launch is a few milliseconds of Python), that was a large share of the web process's CPU.

Here each request borrows a *lane*, a one-thread executor that lives as long as the process, and runs
in a ``ThreadSensitiveContext`` bound to it (asgiref's supported form: "an executor has been given").
When every lane is busy a request waits for one, in the event loop, without a thread. ``WEB_THREADS``
sets how many lanes a process has. A lane is held only while the request's synchronous work runs: its
body is read before, and a whole answer sent after, in the event loop.

And a request crosses to its lane once. Django's handler, in its asynchronous mode, crossed between
the event loop and a thread for the request-started signal, for the middleware, back to the loop for
the URL resolver, over again for the (synchronous) view, twice more on the way out and once to close
the response: six hand-overs, each a future, a wake-up and a context copy. This handler loads the
middleware in Django's synchronous mode, as under WSGI, and does all of a request's synchronous work
in one call on its lane: the signal, the middleware, the view, and closing the response (the
request-finished signal gives its database connection back before the bytes go out). The event loop
only reads the body and writes the answer. A file (``FileResponse``: a download) is read a block at a
time in the loop's thread pool as it goes out, its request finished first; any other streaming
response is read, and closed after its last chunk, on its lane, as Django does. An ``async def`` view
still works: Django's synchronous mode runs it with ``async_to_sync``, on the loop.

It overrides ``ASGIHandler.handle`` and relies on parts of Django's handler and responses that are
not public: ``django_asgi_handler`` uses it only on the Django versions it was checked on (and
unless ``CONSOLE_SPEEDUP_HANDLERS=0``), Django's own handler otherwise (``core.speedups``).
"""

from __future__ import annotations

import asyncio
import contextlib
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers import base
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.http import FileResponse, HttpResponseBase
from django.urls import set_script_prefix

from core import speedups


def django_asgi_handler() -> ASGIHandler:
    """The web process's HTTP handler: ``LaneASGIHandler``, or Django's own where the speed-up is off."""
    return LaneASGIHandler() if speedups.enabled("handlers") else ASGIHandler()


class LaneASGIHandler(ASGIHandler):
    """``django.core.handlers.asgi.ASGIHandler`` with a fixed set of request threads per event loop."""

    def __init__(self) -> None:
        base.BaseHandler.__init__(self)
        self.load_middleware(is_async=False)  # Django's synchronous chain, run on a lane (see above)
        self._respond_on_lane = sync_to_async(self._respond, thread_sensitive=True)  # made once, not per request
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
        await self.handle(scope, receive, send)

    async def handle(self, scope, receive, send) -> None:
        # The body is read, and a whole answer sent, in the event loop: a lane is held only while a
        # request's synchronous work runs, so a slow upload or a slow reader keeps no thread waiting.
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        try:
            set_script_prefix(get_script_prefix(scope))
            lanes = self._lanes_for(asyncio.get_running_loop())
            lane = await lanes.get()
            try:
                async with ThreadSensitiveContext(executor=lane):
                    response = await self._respond_on_lane(scope, body_file)
                    if response.streaming and not getattr(response, "_finished_on_lane", False):
                        # A generator's chunks are made, and it is closed, on the lane's thread.
                        await self._send(response, send)
                        await sync_to_async(response.close, thread_sensitive=True)()
                        return
            finally:
                lanes.put_nowait(lane)
            await self._send(response, send)
        finally:
            body_file.close()

    async def _send(self, response: HttpResponseBase, send) -> None:
        with contextlib.suppress(asyncio.CancelledError):  # as Django's: the client went away meanwhile
            await self.send_response(response, send)

    def _respond(self, scope, body_file) -> HttpResponseBase:
        """A request's synchronous part, on its lane: what Django's handler spreads over six hops."""
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, response = self.create_request(scope, body_file)
        if request is not None:
            response = self.get_response(request)
            response._handler_class = self.__class__
            if isinstance(response, FileResponse) and response.file_to_stream is not None:
                self._stream_file_off_lane(response)
        if not response.streaming:
            response.close()  # its content is all here: request_finished now, before the bytes are sent
        return response

    def _stream_file_off_lane(self, response: FileResponse) -> None:
        """Have a file's bytes read in the event loop's thread pool, a block at a time, as they are sent.

        Django, under ASGI, reads a ``FileResponse``'s whole file into memory (its iterator is
        synchronous) and sends it after: a volume's checkpoint of tens of GB through the files API would
        fill the web process's memory, and hold a request thread while it went out. Here the response
        is finished on its lane now (request_finished: its database connection goes back) except for
        the file, which the chunks' reader closes after the last block.
        """
        filelike = response.file_to_stream
        if hasattr(filelike, "close"):
            response._resource_closers.remove(filelike.close)  # closed by the reader, after the last block
        response.streaming_content = _blocks(filelike, self.chunk_size)
        response.close()
        response._finished_on_lane = True


async def _blocks(filelike, size: int):
    """The file's bytes, ``size`` at a time, read off the event loop; the file closed at the end."""
    loop = asyncio.get_running_loop()
    try:
        while block := await loop.run_in_executor(None, filelike.read, size):
            yield block
    finally:
        if hasattr(filelike, "close"):
            filelike.close()
