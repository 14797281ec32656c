"""A volume's files through the API and its page: list, resumable chunked upload, streamed download,
folders, delete; paths confined to the volume (no ``..``, no symbolic link followed); the volume's size
enforced before a chunk is written; strangers get 404, members as ``teams.access`` says; a region whose
files are not on the console's host says where to browse them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from instances.tests.conftest import backends
from storage import api, files
from storage.models import Volume
from storage.services import volume_usage_refresh
from storage.tests.conftest import make_volume
from storage.tests.test_team_volumes import in_team, lab, team_volume  # noqa: F401 (lab: a fixture)


def _url(volume, what: str = "") -> str:
    return f"/api/v1/volumes/{volume.pk}/files/{what}"


def _put(client, volume, path: str, offset: int, data: bytes):
    return client.put(
        f"{_url(volume, 'content/')}?path={path}&offset={offset}", data, content_type="application/octet-stream"
    )


@pytest.fixture
def local_volume(this_host, rich_alice):
    """A 1 GB volume of alice's on the local backend (a directory under a temporary root)."""
    backend = this_host(services=())
    volume = make_volume(rich_alice, region="local", size_gb=1, name="data")
    assert volume.status == Volume.Status.AVAILABLE
    volume.root = backend.runtime.volume_path(volume.key)
    return volume


def test_upload_in_chunks_resume_download_folders_and_delete(local_volume, client_for, rich_alice):
    client, volume = client_for(rich_alice), local_volume
    payload = os.urandom(3_000_000)

    assert client.post(f"{_url(volume, 'folder/')}?path=/runs/a").status_code == 201
    assert _put(client, volume, "/runs/a/data.bin", 0, payload[:1_000_000]).json()["size"] == 1_000_000
    assert _put(client, volume, "/runs/a/data.bin", 1_000_000, payload[1_000_000:2_000_000]).status_code == 200
    # The connection drops; the client asks how much arrived, and a wrong offset is refused (no hole).
    size = client.get(f"{_url(volume, 'stat/')}?path=/runs/a/data.bin").json()["size"]
    assert size == 2_000_000
    gap = _put(client, volume, "/runs/a/data.bin", size + 1, payload[size:])
    assert gap.status_code == 409 and gap.json()["error"]["code"] == "offset_mismatch"
    assert _put(client, volume, "/runs/a/data.bin", size, payload[size:]).json()["size"] == len(payload)
    assert (volume.root / "runs" / "a" / "data.bin").read_bytes() == payload

    listing = client.get(f"{_url(volume)}?path=/runs/a").json()
    assert listing == [{"name": "data.bin", "type": "file", "size": len(payload), "modified": listing[0]["modified"]}]
    assert client.get(f"{_url(volume)}?path=/").json()[0]["name"] == "runs"
    download = client.get(f"{_url(volume, 'content/')}?path=/runs/a/data.bin")
    assert download.status_code == 200 and download.streaming
    assert b"".join(download.streaming_content) == payload
    assert 'filename="data.bin"' in download["Content-Disposition"]
    volume.refresh_from_db()
    assert volume.used_bytes == len(payload)  # measured by the browser, until the periodic refresh

    assert client.delete(f"{_url(volume)}?path=/runs/a").json()["error"]["code"] == "not_empty"
    assert client.delete(f"{_url(volume)}?path=/runs/a/data.bin").status_code == 204
    assert client.delete(f"{_url(volume)}?path=/runs/a").status_code == 204
    missing = client.get(f"{_url(volume, 'stat/')}?path=/runs/a")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert client.delete(f"{_url(volume)}?path=/").status_code == 409  # the root stays
    assert client.get(_url(volume)).status_code == 400  # no path


def test_a_chunk_past_the_volume_size_is_refused_before_it_is_written(local_volume, client_for, rich_alice):
    client, volume = client_for(rich_alice), local_volume
    # Files already there count: a (sparse) file leaves 1,000 bytes of the 1 GB free.
    with open(volume.root / "big.img", "wb") as handle:
        handle.truncate(volume.size_bytes - 1_000)
    assert _put(client, volume, "/small.bin", 0, b"x" * 600).status_code == 200

    full = _put(client, volume, "/small.bin", 600, b"y" * 500)  # 1,100 bytes in all: 100 too many
    assert full.status_code == 413
    assert full.json()["error"]["code"] == "volume_full"
    assert "400" in full.json()["error"]["message"]  # says what is free
    assert (volume.root / "small.bin").read_bytes() == b"x" * 600  # nothing of it was written
    fresh = _put(client, volume, "/other.bin", 0, b"z" * 401)
    assert fresh.status_code == 413 and not (volume.root / "other.bin").exists()

    # Overwriting from 0 counts the file's old bytes as freed; what fits still goes in.
    assert _put(client, volume, "/small.bin", 0, b"w" * 1_000).json()["size"] == 1_000
    assert _put(client, volume, "/small.bin", 1_000, b"").json()["size"] == 1_000
    # Deleting makes room again.
    assert client.delete(f"{_url(volume)}?path=/big.img").status_code == 204
    assert _put(client, volume, "/other.bin", 0, b"z" * 401).status_code == 200


@pytest.mark.parametrize("path", ["/../escape.txt", "/runs/../../escape.txt", "..", "/a/%2e%2e/b"])
def test_paths_cannot_go_up_out_of_the_volume(local_volume, client_for, rich_alice, path):
    client, volume = client_for(rich_alice), local_volume
    answer = _put(client, volume, path, 0, b"out")
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_path"
    assert client.get(f"{_url(volume)}?path={path}").status_code == 400
    assert not (volume.root.parent / "escape.txt").exists()


def test_symbolic_links_in_the_volume_are_never_followed(local_volume, client_for, rich_alice, tmp_path):
    """An instance mounting the volume may leave links pointing anywhere on the host: the browser lists
    them and deletes them, but never reads, writes or lists through one."""
    client, volume = client_for(rich_alice), local_volume
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret")
    os.symlink(outside, volume.root / "door")
    os.symlink(outside / "secret.txt", volume.root / "secret.txt")

    listing = {e["name"]: e["type"] for e in client.get(f"{_url(volume)}?path=/").json()}
    assert listing == {"door": "link", "secret.txt": "link"}
    for path in ("/door", "/door/secret.txt"):
        through = client.get(f"{_url(volume)}?path={path}")
        assert through.status_code == 400, path
        assert through.json()["error"]["code"] in ("link", "not_a_folder")
    assert client.get(f"{_url(volume, 'content/')}?path=/secret.txt").status_code == 400
    assert client.get(f"{_url(volume, 'content/')}?path=/door/secret.txt").status_code == 400
    assert _put(client, volume, "/secret.txt", 0, b"overwritten").status_code == 400
    assert _put(client, volume, "/door/new.txt", 0, b"planted").status_code == 400
    assert client.post(f"{_url(volume, 'folder/')}?path=/door/sub").status_code == 400
    assert client.delete(f"{_url(volume)}?path=/door/secret.txt").status_code == 400

    assert (outside / "secret.txt").read_text() == "host secret"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    # Deleting a link removes the link, not what it points at.
    assert client.delete(f"{_url(volume)}?path=/door").status_code == 204
    assert (outside / "secret.txt").exists() and not (volume.root / "door").exists()


def test_strangers_get_404_and_a_busy_volume_says_so(local_volume, client_for, charlie, rich_alice):
    volume = local_volume
    stranger = client_for(charlie)
    assert stranger.get(f"{_url(volume)}?path=/").status_code == 404
    assert _put(stranger, volume, "/x", 0, b"x").status_code == 404
    assert stranger.get(f"/storage/{volume.pk}/files/").status_code == 404
    assert stranger.get(f"/storage/{volume.pk}/files/?partial=listing").status_code == 404

    Volume.objects.filter(pk=volume.pk).update(status=Volume.Status.DELETING)
    busy = client_for(rich_alice).get(f"{_url(volume)}?path=/")
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "invalid_state"


def test_team_members_browse_and_only_operators_change(lab, settings, tmp_path):  # noqa: F811
    """The simulated cloud keeps a volume's files under VOLUMES_DIR. In a team: the creator and admins
    change the files, another member browses and downloads, a billing viewer gets nothing."""
    settings.PROVISIONING_BACKENDS = backends(VOLUMES_DIR=str(tmp_path / "volumes"))
    people = lab.people
    volume = team_volume(lab, by=people["bob"])
    other = team_volume(lab, by=people["dave"], name="dave's")

    bob = in_team(people["bob"], lab)
    assert _put(bob, volume, "/notes.txt", 0, b"hello").json()["size"] == 5
    assert (tmp_path / "volumes" / volume.key / "notes.txt").read_bytes() == b"hello"
    assert _put(in_team(people["alice"], lab), volume, "/notes.txt", 5, b"!").status_code == 200  # the owner

    # Bob sees dave's volume but may not change its files.
    assert _put(in_team(people["dave"], lab), other, "/a.txt", 0, b"dave").status_code == 200
    assert [e["name"] for e in bob.get(f"{_url(other)}?path=/").json()] == ["a.txt"]
    assert b"".join(bob.get(f"{_url(other, 'content/')}?path=/a.txt").streaming_content) == b"dave"
    refused = _put(bob, other, "/b.txt", 0, b"bob")
    assert refused.status_code == 403
    assert bob.delete(f"{_url(other)}?path=/a.txt").status_code == 403
    page = bob.get(f"/storage/{other.pk}/files/")
    assert page.status_code == 200 and b"files-pick" not in page.content
    assert b"data-delete" not in bob.get(f"/storage/{other.pk}/files/?partial=listing").content

    # A billing viewer sees no resources (as the volumes API answers her: 403 permission_denied).
    assert in_team(people["erin"], lab).get(f"{_url(volume)}?path=/").status_code == 403
    # The simulated cloud counts the files in the volume's usage, and deletes them with it.
    assert volume_usage_refresh(volume=volume) == 6


def test_the_page_lists_the_folder_and_links_downloads(local_volume, client_for, rich_alice):
    client, volume = client_for(rich_alice), local_volume
    (volume.root / "runs").mkdir()
    (volume.root / "runs" / "model.pt").write_bytes(b"w" * 2048)

    detail = client.get(f"/storage/{volume.pk}/")
    assert f"/storage/{volume.pk}/files/".encode() in detail.content
    page = client.get(f"/storage/{volume.pk}/files/")
    assert page.status_code == 200
    assert f"/api/v1/volumes/{volume.pk}/files/content/".encode() in page.content
    listing = client.get(f"/storage/{volume.pk}/files/?partial=listing&path=/runs").content.decode()
    assert "model.pt" in listing and "2.0" in listing
    assert f"/api/v1/volumes/{volume.pk}/files/content/?path=/runs/model.pt" in listing
    assert "escape" not in client.get(f"/storage/{volume.pk}/files/?partial=listing&path=/../etc").content.decode()


def test_a_region_keeping_files_elsewhere_points_to_an_instance_that_mounts_it(rich_alice, client_for):
    """The simulated cloud without VOLUMES_DIR stands in for a Kubernetes claim: no files on this host."""
    volume = make_volume(rich_alice, size_gb=10)
    client = client_for(rich_alice)
    answer = client.get(f"{_url(volume)}?path=/")
    assert answer.status_code == 409 and answer.json()["error"]["code"] == "unavailable"
    listing = client.get(f"/storage/{volume.pk}/files/?partial=listing").content.decode()
    assert "Attach it to an instance" in listing


def test_a_chunk_bigger_than_allowed_is_refused(local_volume, client_for, rich_alice, monkeypatch):
    monkeypatch.setattr(api, "MAX_CHUNK", 1000)
    monkeypatch.setattr(files, "MAX_CHUNK", 1000)
    answer = _put(client_for(rich_alice), local_volume, "/a.bin", 0, b"a" * 1001)
    assert answer.status_code == 413 and answer.json()["error"]["code"] == "too_large"
    assert not Path(local_volume.root / "a.bin").exists()
