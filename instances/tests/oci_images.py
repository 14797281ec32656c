"""Registries and images for the tests of bring your own image: Debian's docker-registry started on a
free port (optionally with a log-in, htpasswd with a bcrypt hash made by the system's libcrypt), and tiny
one-layer OCI images of any architecture and labels pushed to it with skopeo."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gzip
import hashlib
import io
import json
import shutil
import socket
import subprocess
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def installed() -> bool:
    return bool(shutil.which("docker-registry") and shutil.which("skopeo"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _bcrypt(password: str) -> str:
    lib = ctypes.CDLL(ctypes.util.find_library("crypt") or "libcrypt.so.1")
    lib.crypt.restype = ctypes.c_char_p
    lib.crypt_gensalt.restype = ctypes.c_char_p
    salt = lib.crypt_gensalt(b"$2b$", 5, None, 0)
    return lib.crypt(password.encode(), salt).decode()


@dataclass
class TestRegistry:
    address: str
    username: str = ""
    password: str = ""


@contextlib.contextmanager
def registry_running(root: Path, *, username: str = "", password: str = "") -> Iterator[TestRegistry]:
    """A docker-registry on 127.0.0.1 (plain HTTP), with a log-in when ``username`` is given."""
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    auth = ""
    if username:
        (root / "htpasswd").write_text(f"{username}:{_bcrypt(password)}\n")
        auth = f"auth:\n  htpasswd:\n    realm: test\n    path: {root / 'htpasswd'}\n"
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n"
        f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n  delete:\n    enabled: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n  secret: test-{port}\n{auth}"
    )
    process = subprocess.Popen(
        [shutil.which("docker-registry") or "docker-registry", "serve", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                # wall-clock: one probe of a starting registry; the 30 s deadline above is the wait
                httpx.get(f"http://127.0.0.1:{port}/v2/", timeout=1)
                break
            except httpx.HTTPError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(process.stderr.read().decode() if process.stderr else "no answer") from None
                time.sleep(0.1)
        yield TestRegistry(address=f"127.0.0.1:{port}", username=username, password=password)
    finally:
        process.terminate()
        process.wait(10)


def _blob(root: Path, data: bytes) -> dict:
    digest = hashlib.sha256(data).hexdigest()
    (root / "blobs" / "sha256" / digest).write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def oci_layout(root: Path, *, architecture: str = "amd64", labels: dict | None = None, text: str = "hello\n") -> str:
    """A one-layer OCI image layout at ``root`` for ``linux/<architecture>``; its skopeo reference."""
    (root / "blobs" / "sha256").mkdir(parents=True)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        data = text.encode()
        info = tarfile.TarInfo("etc/hello")
        info.size, info.mtime = len(data), 0
        tar.addfile(info, io.BytesIO(data))
    layer_tar = raw.getvalue()
    layer = {
        "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
        **_blob(root, gzip.compress(layer_tar, mtime=0)),
    }
    config = {
        "architecture": architecture,
        "os": "linux",
        "config": {"Cmd": ["/bin/sh"], "User": "1000", "Labels": labels or {}},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer_tar).hexdigest()]},
    }
    config_blob = {"mediaType": "application/vnd.oci.image.config.v1+json", **_blob(root, json.dumps(config).encode())}
    manifest = {"schemaVersion": 2, "mediaType": MANIFEST, "config": config_blob, "layers": [layer]}
    manifest_blob = _blob(root, json.dumps(manifest).encode())
    index = {
        "schemaVersion": 2,
        "manifests": [
            {"mediaType": MANIFEST, **manifest_blob, "annotations": {"org.opencontainers.image.ref.name": "1"}}
        ],
    }
    (root / "index.json").write_text(json.dumps(index))
    (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    return f"oci:{root}:1"


def push(registry: TestRegistry, scratch: Path, repository: str, tag: str, **image) -> str:
    """Push a tiny image (``oci_layout``'s keywords) to ``registry`` as ``repository:tag``; its digest."""
    source = oci_layout(scratch, **image)
    digest_file = scratch / "pushed-digest"
    argv = ["skopeo", "copy", "--quiet", "--dest-tls-verify=false", "--digestfile", str(digest_file)]
    if registry.username:
        argv.append(f"--dest-creds={registry.username}:{registry.password}")
    subprocess.run([*argv, source, f"docker://{registry.address}/{repository}:{tag}"], check=True)
    return digest_file.read_text().strip()


@contextlib.contextmanager
def open_and_private_registries(tmp_path: Path, settings, *, password: str):
    """An open registry (the console's own) and a private one (user "ci", ``password``), both allowed
    for imports, both plain HTTP: what the import tests, pages and browser run against."""
    with (
        registry_running(tmp_path / "open") as open_registry,
        registry_running(tmp_path / "private", username="ci", password=password) as private,
    ):
        settings.CONSOLE_REGISTRY = open_registry.address
        settings.CONSOLE_REGISTRY_TLS_VERIFY = False
        settings.IMAGES_ALLOWED_REGISTRIES = [open_registry.address, private.address]
        settings.IMAGES_INSECURE_REGISTRIES = [private.address]
        settings.IMAGES_IMPORT_TIMEOUT_S = 5
        yield open_registry, private
