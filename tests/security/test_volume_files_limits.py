"""A volume's file browser cannot be used to hold a web request's lane or stream without end (issue #24).

A volume's files are written by the instances that mount it, so they are their user's: a FIFO blocks
whoever opens it until its other end is opened, a sparse file's holes read as zeros for as long as its
apparent size says, a file may grow while it is downloaded, and a volume may hold millions of files.
The same limits as the instance files API (``test_files_api_limits.py``): regular files only, checked
on what was opened; downloads stop at the size the file had; a deadline on every walk of the volume.
Requests that could hang run in a thread, so the bug fails the test instead of hanging the suite.
"""

from __future__ import annotations

import itertools
import os
import threading

from django.db import connection

from instances.tests.conftest import catalogue, rich_alice, this_host  # noqa: F401 (fixtures)
from storage import files
from storage.tests.test_volume_files import local_volume  # noqa: F401 (a fixture)

PATIENCE_S = 30  # how long a request may take here before the test calls it stuck


def _url(volume, what: str = "") -> str:
    return f"/api/v1/volumes/{volume.pk}/files/{what}"


def _put(client, volume, path: str, data: bytes, offset: int = 0):
    return client.put(
        f"{_url(volume, 'content/')}?path={path}&offset={offset}", data, content_type="application/octet-stream"
    )


def _in_thread(call, *, release):
    """``call()``'s result, run in a thread; if it is still waiting after ``PATIENCE_S``, ``release()``
    unblocks it and the test fails."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(call())
        except Exception as exc:  # handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(PATIENCE_S)
    stuck = thread.is_alive()
    if stuck:
        release()
        thread.join(PATIENCE_S)
    assert not stuck, "the request was still waiting on a FIFO"
    return outcome[0]


def _open_other_end(fifo, flags):
    def release() -> None:
        fd = os.open(fifo, flags | os.O_NONBLOCK)
        os.close(fd)

    return release


def test_a_fifo_on_the_volume_is_neither_downloaded_nor_written(local_volume, client_for, rich_alice):  # noqa: F811
    client, volume = client_for(rich_alice), local_volume
    fifo = volume.root / "pipe"
    os.mkfifo(fifo)

    download = client.get(f"{_url(volume, 'content/')}?path=/pipe")
    assert download.status_code == 400 and download.json()["error"]["code"] == "not_a_file"
    upload = _put(client, volume, "/pipe", b"x")
    assert upload.status_code == 400 and upload.json()["error"]["code"] == "not_a_file"
    assert {e["name"]: e["type"] for e in client.get(f"{_url(volume)}?path=/").json()} == {"pipe": "other"}


def test_a_fifo_swapped_in_after_the_check_is_refused_without_waiting(
    local_volume,  # noqa: F811
    client_for,
    rich_alice,  # noqa: F811
    monkeypatch,
    transactional_db,
):
    """The file is a regular one when the write looks at it and a FIFO when it opens it (an instance
    swapped it meanwhile): what was opened is what is checked, and opening it does not wait for a reader."""
    client, volume = client_for(rich_alice), local_volume
    target = volume.root / "data.bin"
    target.write_bytes(b"old")
    measure = files._usage

    def swap_then_measure(root, *args, **kwargs):  # runs between the write's stat and its open
        target.unlink()
        os.mkfifo(target)
        return measure(root, *args, **kwargs)

    monkeypatch.setattr(files, "_usage", swap_then_measure)

    def upload():
        try:
            return _put(client, volume, "/data.bin", b"new")
        finally:
            connection.close()

    answer = _in_thread(upload, release=_open_other_end(target, os.O_RDONLY))
    assert not isinstance(answer, Exception), answer
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "not_a_file"


def test_a_sparse_file_larger_than_the_volume_is_not_streamed(local_volume, client_for, rich_alice):  # noqa: F811
    client, volume = client_for(rich_alice), local_volume
    with open(volume.root / "hole.bin", "wb") as sparse:
        sparse.truncate(volume.size_bytes + 1)  # no block written: a terabyte would cost as little
    answer = client.get(f"{_url(volume, 'content/')}?path=/hole.bin")
    assert answer.status_code == 413 and answer.json()["error"]["code"] == "too_large"


def test_a_download_stops_at_the_size_the_file_had_when_opened(local_volume, client_for, rich_alice):  # noqa: F811
    client, volume = client_for(rich_alice), local_volume
    growing = volume.root / "log.txt"
    growing.write_bytes(b"a" * 1000)
    download = client.get(f"{_url(volume, 'content/')}?path=/log.txt")
    assert download.status_code == 200 and download["Content-Length"] == "1000"
    with open(growing, "ab") as writer:  # an instance appends while the download goes out
        writer.write(b"b" * 5000)
    assert b"".join(download.streaming_content) == b"a" * 1000


class JumpingClock:
    """``time.monotonic`` that moves ``step`` seconds on every reading: a slow disk, without waiting."""

    def __init__(self, step: float) -> None:
        self.readings = itertools.count(step=step)

    def monotonic(self) -> float:
        return float(next(self.readings))


def test_walking_a_large_volume_gives_up_at_the_deadline(local_volume, client_for, rich_alice, monkeypatch, settings):  # noqa: F811
    client, volume = client_for(rich_alice), local_volume
    settings.STORAGE_FILES_DEADLINE_S = 30
    for n in range(5):
        (volume.root / f"run-{n}").mkdir()
    for n in range(3000):
        (volume.root / f"f{n}").touch()
    monkeypatch.setattr(files, "time", JumpingClock(step=20))

    listing = client.get(f"{_url(volume)}?path=/")
    assert listing.status_code == 504 and listing.json()["error"]["code"] == "timeout"
    upload = _put(client, volume, "/run-0/new.bin", b"x")  # the size check walks every folder
    assert upload.status_code == 504 and upload.json()["error"]["code"] == "timeout"
    assert not (volume.root / "run-0" / "new.bin").exists()

    monkeypatch.undo()
    assert client.get(f"{_url(volume)}?path=/run-0").status_code == 200
