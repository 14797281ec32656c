"""The web process's ASGI handler (``console.handlers.LaneASGIHandler``): requests run on a fixed set of
threads that outlive them, more requests than threads wait their turn, and every lane comes back."""

from __future__ import annotations

import asyncio
import contextlib
import io
import threading

import pytest
from asgiref.sync import SyncToAsync
from django.core.signals import request_finished
from django.http import FileResponse, HttpResponse, StreamingHttpResponse
from django.urls import path

from console.handlers import LaneASGIHandler

FILE_BYTES = bytes(range(256)) * 1024  # 256 KiB: four of the handler's 64 KiB blocks


_files: list[io.BytesIO] = []


def _file(request):
    handle = io.BytesIO(FILE_BYTES)
    _files.append(handle)
    return FileResponse(handle, filename="model.bin")


def _streamed(request):
    return StreamingHttpResponse(f"part {n};".encode() for n in range(3))


async def _async_view(request):
    return HttpResponse(b"from a coroutine")


urlpatterns = [path("streamed", _streamed), path("async", _async_view), path("file", _file)]


def _scope(url: str, method: str = "GET") -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": url,
        "raw_path": url.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 40000),
        "server": ("testserver", 80),
    }


@contextlib.contextmanager
def _finishes_into(events: list):
    """Append "finished" to ``events`` when Django's request_finished signal is sent."""

    def finished(**kwargs):
        events.append("finished")

    request_finished.connect(finished)
    try:
        yield
    finally:
        request_finished.disconnect(finished)


async def _get(handler: LaneASGIHandler, url: str) -> tuple[int, bytes]:
    sent: list[dict] = []
    body_sent = asyncio.Event()

    async def receive() -> dict:
        if not body_sent.is_set():
            body_sent.set()
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.sleep(3600)  # the client stays connected until the response is sent
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    await handler(_scope(url), receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    return start["status"], b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def _lane_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("web-")}


def test_twelve_requests_at_once_share_three_long_lived_threads(settings):
    settings.WEB_THREADS = 3
    handler = LaneASGIHandler()

    async def burst() -> list[tuple[int, bytes]]:
        answers = await asyncio.gather(*(_get(handler, "/healthz") for _ in range(12)))
        lanes = handler._lanes[asyncio.get_running_loop()]
        assert lanes.qsize() == 3  # every lane came back
        return answers

    before = _lane_threads()
    answers = asyncio.run(burst())
    assert [status for status, _body in answers] == [200] * 12
    assert all(b'"ok"' in body for _status, body in answers)
    started = _lane_threads() - before
    assert 1 <= len(started) <= 3  # the requests ran on the lanes, not on a thread each


def test_only_http_is_served():
    with pytest.raises(ValueError, match="websocket"):
        asyncio.run(LaneASGIHandler()({"type": "websocket"}, None, None))


def test_a_request_crosses_to_its_thread_once_and_is_finished_before_its_answer_goes_out(monkeypatch):
    hops, events = [], []
    real = SyncToAsync.__call__

    async def counted(self, *args, **kwargs):
        hops.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", counted)
    handler = LaneASGIHandler()
    real_send = handler.send_response

    async def send_response(response, send):
        events.append("sent")
        await real_send(response, send)

    handler.send_response = send_response

    with _finishes_into(events):
        status, body = asyncio.run(_get(handler, "/healthz"))
    assert status == 200 and b'"ok"' in body
    assert hops == ["LaneASGIHandler._respond"]  # middleware, view and close in one hand-over
    assert events == ["finished", "sent"]  # its database connection went back before the bytes went out


@pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators")
def test_a_streamed_answer_arrives_whole_and_is_finished_after_its_last_chunk(settings):
    settings.ROOT_URLCONF = __name__
    events: list[str] = []
    with _finishes_into(events):
        status, body = asyncio.run(_get(LaneASGIHandler(), "/streamed"))
    assert (status, body) == (200, b"part 0;part 1;part 2;")
    assert events == ["finished"]


def test_an_async_view_still_answers(settings):
    settings.ROOT_URLCONF = __name__
    assert asyncio.run(_get(LaneASGIHandler(), "/async")) == (200, b"from a coroutine")


def test_a_slow_upload_holds_no_thread_while_its_body_arrives(settings):
    settings.WEB_THREADS = 1
    handler = LaneASGIHandler()
    rest_of_body = asyncio.Event()

    async def slow_upload() -> int:
        chunks = [{"type": "http.request", "body": b"{", "more_body": True}]

        async def receive() -> dict:
            if chunks:
                return chunks.pop()
            await rest_of_body.wait()  # the client is still sending
            return {"type": "http.request", "body": b"}", "more_body": False}

        sent: list[dict] = []

        async def send(message: dict) -> None:
            sent.append(message)

        await handler(_scope("/healthz", method="POST"), receive, send)
        return next(m["status"] for m in sent if m["type"] == "http.response.start")

    async def both() -> tuple[int, tuple[int, bytes]]:
        upload = asyncio.create_task(slow_upload())
        await asyncio.sleep(0.05)
        # The only lane is free: another request is answered while the upload's body is still coming.
        answered = await asyncio.wait_for(_get(handler, "/healthz"), timeout=10)
        assert not upload.done()
        rest_of_body.set()
        return await upload, answered

    upload_status, (status, body) = asyncio.run(both())
    assert status == 200 and b'"ok"' in body
    assert upload_status == 403  # a POST without a CSRF token: refused, but answered once its body was in


def test_a_file_goes_out_a_block_at_a_time_after_its_request_is_finished(settings):
    settings.ROOT_URLCONF = __name__
    settings.WEB_THREADS = 1
    handler = LaneASGIHandler()
    events: list[str] = []
    real_send = handler.send_response

    async def send_response(response, send):
        async def counting_send(message):
            if message["type"] == "http.response.body" and message.get("body"):
                events.append("block")
            await send(message)

        await real_send(response, counting_send)

    handler.send_response = send_response

    with _finishes_into(events):
        status, body = asyncio.run(_get(handler, "/file"))
    assert (status, body) == (200, FILE_BYTES)
    # Finished on its thread before any byte went out; then read and sent in blocks, not in one piece.
    assert events == ["finished", "block", "block", "block", "block"]
    assert _files[-1].closed  # the file is closed once its last block is read
