"""Files in and out of an instance through the API, over SFTP with the instance's gateway key (to the
SSH server standing in for the instance's sshd): list, resumable chunked upload, download, folders,
delete; strangers get 404 and the simulated cloud says it has no files."""

from __future__ import annotations

import pytest

from gateway.tests.test_gateway_pass_through import instance_sshd  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def _url(instance, what: str = "") -> str:
    return f"/api/v1/instances/{instance.pk}/files/{what}"


def test_a_chunked_upload_survives_a_dropped_connection_and_downloads_whole(world, instance_sshd, client_for):  # noqa: F811
    alice, instance = world["alice"], world["instance"]
    client = client_for(alice.user)
    payload = bytes(range(256)) * 12_000  # about 3 MB, in three chunks
    chunks = [payload[:1_000_000], payload[1_000_000:2_000_000], payload[2_000_000:]]
    put = lambda offset, chunk: client.put(  # noqa: E731
        f"{_url(instance, 'content/')}?path=/runs/data.bin&offset={offset}",
        chunk,
        content_type="application/octet-stream",
    )

    assert client.post(f"{_url(instance, 'folder/')}?path=/runs").status_code == 201
    assert put(0, chunks[0]).json()["size"] == 1_000_000
    assert put(1_000_000, chunks[1]).status_code == 200
    # The connection drops here; the client asks where to resume, and a wrong offset is refused.
    size = client.get(f"{_url(instance, 'stat/')}?path=/runs/data.bin").json()["size"]
    assert size == 2_000_000
    gap = put(size + 10, chunks[2])
    assert gap.status_code == 409 and gap.json()["error"]["code"] == "offset_mismatch"
    assert put(size, chunks[2]).json()["size"] == len(payload)
    assert (instance_sshd / "runs" / "data.bin").read_bytes() == payload

    listing = client.get(f"{_url(instance)}?path=/runs").json()
    assert listing == [{"name": "data.bin", "type": "file", "size": len(payload), "modified": listing[0]["modified"]}]
    download = client.get(f"{_url(instance, 'content/')}?path=/runs/data.bin")
    assert download.status_code == 200 and b"".join(download.streaming_content) == payload
    assert download["Content-Disposition"] == 'attachment; filename="data.bin"'

    assert client.delete(f"{_url(instance)}?path=/runs/data.bin").status_code == 204
    assert client.delete(f"{_url(instance)}?path=/runs").status_code == 204
    missing = client.get(f"{_url(instance, 'stat/')}?path=/runs")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


def test_strangers_get_404_and_the_simulated_cloud_has_no_files(world, client_for):
    instance = world["instance"]
    assert client_for(world["charlie"].user).get(f"{_url(instance)}?path=/").status_code == 404
    refused = client_for(world["alice"].user).get(f"{_url(instance)}?path=/")
    assert refused.status_code == 409
    assert "simulated cloud has no files" in refused.json()["error"]["message"]
    assert client_for(world["alice"].user).get(_url(instance)).status_code == 400  # no path
