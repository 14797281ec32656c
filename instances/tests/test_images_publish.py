"""Publishing the catalogue's images to a real registry (Debian's docker-registry, started per test):
the digest and size recorded are the registry's own, a new slug becomes a catalogue image, and a
launch pins what was published. The image pushed is a tiny OCI layout made here from a tar."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import socket
import subprocess
import tarfile

import httpx
import pytest
from django.core.management import CommandError, call_command

from console.embedded import EmbeddedRegistry
from instances.models import Image
from instances.registry import MANIFEST_TYPES, Registry, RegistryError
from instances.tests.conftest import launch

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        not (shutil.which("docker-registry") and shutil.which("skopeo")), reason="needs docker-registry and skopeo"
    ),
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def registry(tmp_path, settings):
    server = EmbeddedRegistry(tmp_path / "registry", port=_free_port())
    process = subprocess.Popen(server.argv(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert server.wait(30, process), process.stderr.read().decode() if process.poll() is not None else "no answer"
        settings.CONSOLE_REGISTRY = server.address
        settings.CONSOLE_REGISTRY_TLS_VERIFY = False
        yield server
    finally:
        process.terminate()
        process.wait(10)


def _blob(root, data: bytes) -> dict:
    digest = hashlib.sha256(data).hexdigest()
    (root / "blobs" / "sha256" / digest).write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def oci_layout(root, *, os_release: str, tag: str = "1") -> str:
    """A one-layer OCI image layout at ``root`` whose /etc/os-release says ``os_release``; its skopeo reference."""
    (root / "blobs" / "sha256").mkdir(parents=True)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        data = os_release.encode()
        info = tarfile.TarInfo("etc/os-release")
        info.size, info.mtime = len(data), 0
        tar.addfile(info, io.BytesIO(data))
    layer_tar = raw.getvalue()
    layer = {
        "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
        **_blob(root, gzip.compress(layer_tar, mtime=0)),
    }
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Cmd": ["/bin/sh"]},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer_tar).hexdigest()]},
    }
    config_blob = {"mediaType": "application/vnd.oci.image.config.v1+json", **_blob(root, json.dumps(config).encode())}
    manifest = {"schemaVersion": 2, "mediaType": MANIFEST_TYPES[0], "config": config_blob, "layers": [layer]}
    manifest_blob = _blob(root, json.dumps(manifest).encode())
    index = {
        "schemaVersion": 2,
        "manifests": [
            {"mediaType": MANIFEST_TYPES[0], **manifest_blob, "annotations": {"org.opencontainers.image.ref.name": tag}}
        ],
    }
    (root / "index.json").write_text(json.dumps(index))
    (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    return f"oci:{root}:{tag}"


def _head(registry, path: str, tag: str) -> int:
    headers = {"Accept": ", ".join(MANIFEST_TYPES)}
    return httpx.head(f"http://{registry.address}/v2/{path}/manifests/{tag}", headers=headers).status_code


def _record(records, name: str, **fields) -> None:
    records.mkdir(exist_ok=True)
    (records / f"{name}.json").write_text(json.dumps({"name": name, **fields}))


def test_publishing_records_the_registrys_digest_and_size_and_creates_the_catalogue_image(
    registry, tmp_path, catalogue, capsys
):
    source = oci_layout(tmp_path / "layout", os_release='PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n')
    records = tmp_path / "records"
    contents = {"python": "3.11.2", "os": "Debian 12"}
    _record(
        records,
        "python-minimal",
        source=source,
        tag="3.11",
        slug="python-3.11-minimal",
        contents=contents,
        display_name="Python 3.11 (minimal)",
    )

    call_command("images_publish", "--records", str(records))

    image = Image.objects.get(slug="python-3.11-minimal")
    assert image.repository == f"{registry.address}/python-minimal" and image.tag == "3.11"
    assert image.name == "Python 3.11 (minimal)" and image.contents == contents and image.python_version == "3.11.2"
    # What the registry itself serves under that tag, read here without the console's client.
    served = httpx.get(
        f"http://{registry.address}/v2/python-minimal/manifests/3.11", headers={"Accept": ", ".join(MANIFEST_TYPES)}
    )
    manifest = served.json()
    assert (
        image.digest
        == served.headers["docker-content-digest"]
        == "sha256:" + hashlib.sha256(served.content).hexdigest()
    )
    assert image.size_bytes == len(served.content) + manifest["config"]["size"] + sum(
        layer["size"] for layer in manifest["layers"]
    )
    assert "python-3.11-minimal created" in capsys.readouterr().out


def test_a_new_build_moves_the_tag_and_the_catalogue_while_a_launched_machine_keeps_its_digest(
    registry, tmp_path, rich_alice
):
    records = tmp_path / "records"
    _record(records, "pytorch", source=oci_layout(tmp_path / "a", os_release="one\n"), slug="pytorch-2.5-cu124")
    call_command("images_publish", "pytorch", "--records", str(records))
    first = Image.objects.get(slug="pytorch-2.5-cu124")
    instance = launch(rich_alice)

    _record(records, "pytorch", source=oci_layout(tmp_path / "b", os_release="two\n"), slug="pytorch-2.5-cu124")
    call_command("images_publish", "pytorch", "--records", str(records))

    second = Image.objects.get(slug="pytorch-2.5-cu124")
    assert second.digest != first.digest and second.name == first.name and second.is_active
    assert instance.image_ref == f"{registry.address}/pytorch@{first.digest}"


def test_an_image_not_built_or_not_pushable_is_named_and_the_others_still_publish(registry, tmp_path, catalogue):
    records = tmp_path / "records"
    _record(records, "good", source=oci_layout(tmp_path / "good", os_release="ok\n"))
    _record(records, "broken", source=f"oci:{tmp_path / 'nowhere'}:1")

    with pytest.raises(CommandError, match="Not published: broken, missing"):
        call_command("images_publish", "good", "broken", "missing", "--records", str(records))
    assert Image.objects.get(slug="good").digest.startswith("sha256:")


def test_the_client_names_what_is_missing_and_refuses_names_outside_its_registry(registry):
    client = Registry(address=registry.address, username="u", password="p", tls_verify=False)
    with pytest.raises(RegistryError, match="is not in the registry"):
        client.manifest(client.repository("nothing-here"), "latest")
    with pytest.raises(RegistryError, match="not a repository name"):
        client.repository("Bad Name")
    with pytest.raises(RegistryError, match="not in the registry"):
        client.path_of("elsewhere.example.com/x")


def test_without_a_registry_the_command_says_how_to_name_one(settings, tmp_path):
    settings.CONSOLE_REGISTRY = ""
    _record(tmp_path, "x", source="oci:/nowhere:1")
    with pytest.raises(CommandError, match="CONSOLE_REGISTRY"):
        call_command("images_publish", "--records", str(tmp_path))


def test_a_build_record_as_scripts_images_writes_it_is_named_from_its_ref_and_contents(registry, tmp_path, catalogue):
    records = tmp_path / "records"
    contents = {"os": "Debian GNU/Linux 12 (bookworm)", "python": "3.11.2", "jupyterlab": "4.6.6"}
    _record(
        records,
        "minimal",
        source=oci_layout(tmp_path / "m", os_release="m\n"),
        ref="localhost/console/minimal:latest",
        image_id="0" * 64,
        size_bytes=405_796_074,
        contract=True,
        contents=contents,
    )
    _record(
        records,
        "base",
        source=oci_layout(tmp_path / "b", os_release="b\n"),
        ref="localhost/console/base:bookworm",
        contract=False,
        contents={"python": "3.11.2", "jupyterlab": None},
    )

    call_command("images_publish", "--records", str(records))

    image = Image.objects.get(slug="python-3.11-minimal")
    assert image.repository == f"{registry.address}/console/minimal" and image.tag == "latest"
    assert image.name == "Python 3.11 (minimal)" and image.is_active
    assert image.contents == {**contents, "disk_bytes": 405_796_074}
    assert not Image.objects.filter(slug__contains="base").exists()  # the base is no instance image
    assert _head(registry, "console/base", "bookworm") == 404

    call_command("images_publish", "base", "--records", str(records))  # named: pushed, still not offered
    assert _head(registry, "console/base", "bookworm") == 200
    assert not Image.objects.filter(slug__contains="base").exists()


def test_behind_token_auth_the_client_fetches_a_bearer_token_with_its_credentials(settings):
    """A registry configured with ``auth: token`` answers 401 with a Bearer challenge naming its token
    service; the client asks that service with its credentials and the challenge's scope, then retries."""
    import base64
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import parse_qs, urlparse

    body = json.dumps({"schemaVersion": 2, "mediaType": MANIFEST_TYPES[0], "config": {"size": 7}, "layers": []})
    digest = "sha256:" + hashlib.sha256(body.encode()).hexdigest()
    asked = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _answer(self, with_body: bool):
            url = urlparse(self.path)
            if url.path == "/token":
                asked.append(parse_qs(url.query))
                good = "Basic " + base64.b64encode(b"console:s3cret").decode()
                payload = b'{"token": "tok"}' if self.headers.get("Authorization") == good else b"{}"
                self.send_response(200 if payload != b"{}" else 401)
                self.end_headers()
                self.wfile.write(payload)
                return
            if self.headers.get("Authorization") != "Bearer tok":
                self.send_response(401)
                port = self.server.server_address[1]
                self.send_header(
                    "WWW-Authenticate",
                    f'Bearer realm="http://127.0.0.1:{port}/token",service="registry",'
                    'scope="repository:console/minimal:pull"',
                )
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Docker-Content-Digest", digest)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if with_body:
                self.wfile.write(body.encode())

        def do_HEAD(self):
            self._answer(False)

        def do_GET(self):
            self._answer(True)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        address = f"127.0.0.1:{server.server_address[1]}"
        client = Registry(address=address, username="console", password="s3cret", tls_verify=False)
        assert client.image_size(f"{address}/console/minimal", "latest") == (digest, len(body) + 7)
        assert asked[0] == {"service": ["registry"], "scope": ["repository:console/minimal:pull"]}
        wrong = Registry(address=address, username="console", password="wrong", tls_verify=False)
        with pytest.raises(RegistryError, match="token service refused"):
            wrong.manifest(f"{address}/console/minimal", "latest")
    finally:
        server.shutdown()
