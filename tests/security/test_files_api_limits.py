"""The instance Files API cannot be used to hold a web request's lane or its memory (issue #24).

An instance's disk is its user's: a FIFO there blocks whoever opens it until its other end is opened,
and a file can grow between the size the API checks and the bytes it reads. The SFTP server stands in
for the instance's sshd (``gateway.tests.test_gateway_pass_through``); requests run in a thread so a
request that hangs (the bug) fails the test instead of hanging the suite.
"""

from __future__ import annotations

import asyncio
import os
import threading

import asyncssh
import pytest
from django.db import connection

from gateway import api, files
from gateway.tests.conftest import catalogue, loop_thread, simulated_cloud, world  # noqa: F401 (fixtures)
from gateway.tests.test_gateway_pass_through import instance_sshd  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)

PATIENCE_S = 60  # how long a request may take here before the test calls it stuck


def _url(instance, what: str = "") -> str:
    return f"/api/v1/instances/{instance.pk}/files/{what}"


class InThread:
    """``call()`` in a thread; ``result(release)`` waits for it, calling ``release`` first if it hangs
    so that the stand-in sshd (blocked with it) can finish and be shut down."""

    def __init__(self, call) -> None:
        self.outcome: list = []

        def run() -> None:
            try:
                self.outcome.append(call())
            except Exception as exc:  # handed to the test
                self.outcome.append(exc)
            finally:
                connection.close()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def result(self, release):
        self.thread.join(PATIENCE_S)
        stuck = self.thread.is_alive()
        if stuck:
            release()
            self.thread.join(PATIENCE_S)
        assert not stuck, "the request was still waiting on the instance"
        return self.outcome[0]


def _release_fifo(fifo) -> None:
    """Open the FIFO's read end, so a writer blocked in open() goes on (and its few bytes fit the pipe)."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    threading.Timer(PATIENCE_S, os.close, args=(fd,)).start()


def test_an_upload_onto_a_fifo_is_refused_without_opening_it(world, instance_sshd, client_for):  # noqa: F811
    instance = world["instance"]
    fifo = instance_sshd / "pipe"
    os.mkfifo(fifo)
    client = client_for(world["alice"].user)
    request = InThread(
        lambda: client.put(
            f"{_url(instance, 'content/')}?path=/pipe&offset=0", b"hello", content_type="application/octet-stream"
        )
    )
    answer = request.result(release=lambda: _release_fifo(fifo))
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "not_a_file"


def test_reading_a_fifo_is_refused_without_opening_it(world, instance_sshd):  # noqa: F811
    os.mkfifo(instance_sshd / "pipe")

    def read():
        with pytest.raises(files.FilesRefused) as refused:
            files.file_read(instance=world["instance"], path="/pipe", cap=1024)
        return refused.value

    def release() -> None:
        fd = os.open(instance_sshd / "pipe", os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)  # the reader sees the end of the file at once

    refused = InThread(read).result(release=release)
    assert isinstance(refused, files.FilesRefused) and refused.code == "not_a_file"


def test_a_file_that_grows_after_its_check_stops_at_the_cap(world, instance_sshd, client_for, monkeypatch):  # noqa: F811
    instance = world["instance"]
    grows = instance_sshd / "grows.bin"
    grows.write_bytes(b"x" * 100_000)
    monkeypatch.setattr(api, "MAX_DOWNLOAD", 1024 * 1024)
    checked = files.file_stat

    def check_then_grow(**kwargs):
        entry = checked(**kwargs)
        with open(grows, "r+b") as handle:  # between the check and the read, the file becomes 64 MiB
            handle.truncate(64 * 1024 * 1024)  # sparse: nothing is written to disk
        return entry

    monkeypatch.setattr(files, "file_stat", check_then_grow)
    answer = client_for(world["alice"].user).get(f"{_url(instance, 'content/')}?path=/grows.bin")
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "too_large"


def test_a_download_is_streamed_not_held_whole(world, instance_sshd, client_for):  # noqa: F811
    payload = bytes(range(256)) * 8192  # 2 MiB
    (instance_sshd / "data.bin").write_bytes(payload)
    answer = client_for(world["alice"].user).get(f"{_url(world['instance'], 'content/')}?path=/data.bin")
    assert answer.status_code == 200
    assert answer.streaming
    assert b"".join(answer.streaming_content) == payload
    assert answer["Content-Disposition"] == 'attachment; filename="data.bin"'


def test_an_instance_that_stops_answering_frees_the_request_at_the_deadline(
    world,  # noqa: F811
    instance_sshd,  # noqa: F811
    client_for,
    settings,
    monkeypatch,
):
    settings.GATEWAY_FILES_DEADLINE_S = 3
    released = threading.Event()

    class StallingSFTPServer(asyncssh.SFTPServer):
        """Answers every read only once the test releases it (never, unless the request hangs)."""

        async def read(self, file_obj, offset, size):
            while not released.is_set():
                await asyncio.sleep(0.1)
            return super().read(file_obj, offset, size)

    monkeypatch.setattr(asyncssh, "SFTPServer", StallingSFTPServer)  # what the stand-in sshd serves
    (instance_sshd / "data.bin").write_bytes(b"x" * 1000)
    client = client_for(world["alice"].user)
    request = InThread(lambda: client.get(f"{_url(world['instance'], 'content/')}?path=/data.bin"))
    answer = request.result(release=released.set)
    released.set()
    assert answer.status_code == 504
    assert answer.json()["error"]["code"] == "timeout"
