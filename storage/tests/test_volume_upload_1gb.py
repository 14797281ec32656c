"""The proof of issue 16's resumable upload: a 1 GiB file goes up to a local-backend volume in 16 MiB
chunks over a real HTTP connection (the live server), one chunk's connection is closed half-way through
its body, the client asks the server how many bytes it has and carries on from there, and the file on
the volume, and its streamed download, have the right size and sha256.

The bytes come from a generator (a 1 MiB block, each copy stamped with its index so that a chunk
written at the wrong offset changes the digest); nothing holds more than a block in memory.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from accounts.services import api_token_create
from storage.models import Volume
from storage.tests.conftest import make_volume

pytestmark = pytest.mark.django_db(transaction=True)

BLOCK = 1024 * 1024
CHUNK = 16 * BLOCK
TOTAL = 1024 * BLOCK  # 1 GiB: 64 chunks
DROP_AT = 29  # the chunk whose connection is closed half-way
_BASE = os.urandom(BLOCK)


def _blocks(start: int, end: int) -> Iterator[bytes]:
    """The file's bytes from ``start`` to ``end`` (block-aligned starts are the common case)."""
    while start < end:
        index, skip = divmod(start, BLOCK)
        block = index.to_bytes(8, "big") + _BASE[8:]
        piece = block[skip : skip + min(BLOCK - skip, end - start)]
        yield piece
        start += len(piece)


class Api:
    """The volume files API over plain HTTP, as a command-line client would use it."""

    def __init__(self, url: str, token: str, volume: Volume) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname, parts.port
        self.headers = {"Authorization": f"Bearer {token}"}
        self.base = f"/api/v1/volumes/{volume.pk}/files"

    def _connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=60)

    def put_chunk(self, path: str, offset: int, end: int, *, cut_after: int | None = None) -> int | None:
        """Send bytes ``offset..end``; with ``cut_after``, close the socket after that many bytes of the
        body (the connection drops) and return None."""
        connection = self._connection()
        connection.putrequest("PUT", f"{self.base}/content/?path={path}&offset={offset}")
        for name, value in {**self.headers, "Content-Type": "application/octet-stream"}.items():
            connection.putheader(name, value)
        connection.putheader("Content-Length", str(end - offset))
        connection.endheaders()
        sent = 0
        for piece in _blocks(offset, end):
            if cut_after is not None and sent + len(piece) > cut_after:
                connection.send(piece[: cut_after - sent])
                connection.sock.close()  # the client goes away mid-body
                return None
            connection.send(piece)
            sent += len(piece)
        response = connection.getresponse()
        body = json.loads(response.read())
        connection.close()
        assert response.status == 200, body
        return body["size"]

    def size(self, path: str) -> int:
        connection = self._connection()
        connection.request("GET", f"{self.base}/stat/?path={path}", headers=self.headers)
        response = connection.getresponse()
        body = json.loads(response.read())
        connection.close()
        assert response.status == 200, body
        return body["size"]

    def download_digest(self, path: str) -> tuple[int, str]:
        connection = self._connection()
        connection.request("GET", f"{self.base}/content/?path={path}", headers=self.headers)
        response = connection.getresponse()
        assert response.status == 200
        digest, size = hashlib.sha256(), 0
        while piece := response.read(4 * BLOCK):
            digest.update(piece)
            size += len(piece)
        connection.close()
        return size, digest.hexdigest()


def test_a_1_gib_upload_in_chunks_survives_a_dropped_connection(this_host, rich_alice, live_server):
    backend = this_host(services=())
    volume = make_volume(rich_alice, region="local", size_gb=1, name="big")  # exactly the file's size
    _token, raw = api_token_create(user=rich_alice, name="upload", expires_at=None)
    api = Api(live_server.url, raw, volume)
    expected = hashlib.sha256()
    for piece in _blocks(0, TOTAL):
        expected.update(piece)

    started = time.monotonic()
    offset, resumed_at = 0, None
    while offset < TOTAL:
        end = min(offset + CHUNK, TOTAL)
        if offset == DROP_AT * CHUNK and resumed_at is None:
            assert api.put_chunk("/ckpt/model.bin", offset, end, cut_after=CHUNK // 2) is None
            # Ask the server what it has (the half that arrived is kept once its request has ended).
            # The server may still be writing what arrived: wait until its answer settles.
            deadline, previous = time.monotonic() + 30, -1
            while (resumed_at := api.size("/ckpt/model.bin")) != previous or resumed_at <= offset:
                assert time.monotonic() < deadline, "the server never reported the half chunk"
                previous = resumed_at
                time.sleep(0.1)
            assert offset < resumed_at <= offset + CHUNK // 2, resumed_at
            offset = resumed_at
            continue
        offset = api.put_chunk("/ckpt/model.bin", offset, end)
    uploaded_s = time.monotonic() - started

    path = backend.runtime.volume_path(volume.key) / "ckpt" / "model.bin"
    assert path.stat().st_size == TOTAL
    on_disk = hashlib.sha256()
    with open(path, "rb") as handle:
        while piece := handle.read(8 * BLOCK):
            on_disk.update(piece)
    assert on_disk.hexdigest() == expected.hexdigest()
    assert api.download_digest("/ckpt/model.bin") == (TOTAL, expected.hexdigest())
    print(f"1 GiB up in {uploaded_s:.1f} s (resumed at {resumed_at}), {time.monotonic() - started:.1f} s with checks")
