"""Saving an instance's container as an image: the commit, the fix of its top layer, the push.

``podman commit`` of a rootful container run with ``--uidmap 0:BASE:COUNT`` writes **host** uids
(BASE + n) into the new layer: an open bug of podman / containers-storage 4.x ("wrong uids when
userns and idmapping are used"; ``shared/notes/containers.md``). An instance launched from such an
image, in another tenant's range, cannot read its own files (``PermissionError``). So the committed
image is copied out of podman's store into a ``dir:`` layout (layers uncompressed, as the store keeps
them), its top layer is rewritten with every uid and gid in ``[BASE, BASE + COUNT)`` shifted back by
BASE, the config and manifest are written anew (the layer's digest and ``diff_id`` change), and the
layout is pushed to the registry. ``providers/local/tests/test_image_save_podman.py`` says loudly when
podman commits container uids by itself (then the shift finds nothing to shift, and can go).

The same pass keeps the console's secrets out: nothing under the secrets and host-key mounts, ``/run``
or ``/tmp`` (tmpfs: a commit should never see them, and the pass makes sure), no sshd host keys, and
no file or config value holding one of the instance's tokens (the save is refused, naming the file:
the owner copied a token somewhere, and an image must never carry it). The console's labels are
dropped and the image's own entrypoint and command put back (a container of a non-contract image runs
the console's start script, which a saved image must not name as its own).

No Django here: the functions below that take paths are pure and tested without podman
(``providers/local/tests/test_image_save_layers.py``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import stat
import tarfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
DOCKER_LAYER_TAR = "application/vnd.docker.image.rootfs.diff.tar"
# Labels the console put on the container (``container_spec.INSTANCE_LABEL`` and the config digest):
# they name one instance, not the image.
CONSOLE_LABELS = ("org.gpu-console.instance", "org.gpu-console.config")
# Never saved: the console's mounts and the tmpfs folders (a commit leaves them out; this makes sure),
# and sshd host keys (a machine's identity; sshd makes new ones).
DROPPED_PREFIXES = ("run/", "tmp/", "home/user/")
DROPPED_NAMES = ("run", "tmp")
DROPPED_GLOBS = ("etc/ssh/ssh_host_",)
CHUNK = 1 << 20


class ImageSaveError(Exception):
    """The image cannot be saved as it is; the message is plain enough for the owner."""


@dataclass
class LayerReport:
    """What the rewrite of a layer did: members kept, shifted (host uids back to the image's) and dropped."""

    members: int = 0
    shifted: int = 0
    dropped: list[str] = field(default_factory=list)
    host_uids_seen: int = 0  # members whose uid or gid was in the tenant's host range before the shift


def _normalise(name: str) -> str:
    return name.removeprefix("./").lstrip("/")


def _dropped(name: str) -> bool:
    path = _normalise(name)
    if path in DROPPED_NAMES:
        return False  # the folder itself stays (an empty mount point), its contents go
    return path.startswith(DROPPED_PREFIXES) or any(path.startswith(g) for g in DROPPED_GLOBS)


def _shift(value: int, base: int, count: int) -> int | None:
    return value - base if base <= value < base + count else None


class _Scanning:
    """A member's data as the writer reads it, refusing a member that holds a secret (the tail of each
    read is kept, so a token cut between two reads is still found)."""

    def __init__(self, src: BinaryIO, needles: Sequence[bytes], name: str) -> None:
        self.src, self.needles, self.name = src, needles, name
        self.keep = max((len(n) for n in needles), default=0)
        self.tail = b""

    def read(self, size: int = -1) -> bytes:
        chunk = self.src.read(size)
        if self.needles and chunk:
            window = self.tail + chunk
            for needle in self.needles:
                if needle in window:
                    raise ImageSaveError(
                        f"/{_normalise(self.name)} holds one of the console's tokens for this instance: "
                        "delete it (or the token from it) and save again"
                    )
            self.tail = window[-self.keep :]
        return chunk


def layer_rewrite(
    src: BinaryIO, dst: BinaryIO, *, uid_base: int, uid_count: int, secrets: Iterable[str] = ()
) -> LayerReport:
    """Copy the tar ``src`` to ``dst``: uids and gids of the tenant's host range shifted back to the
    image's own, the console's paths dropped, members holding a secret refused (``ImageSaveError``)."""
    needles = [s.encode() for s in secrets if s]
    report = LayerReport()
    with (
        tarfile.open(fileobj=src, mode="r|*") as reader,
        tarfile.open(fileobj=dst, mode="w|", format=tarfile.PAX_FORMAT) as writer,
    ):
        for member in reader:
            if _dropped(member.name):
                report.dropped.append("/" + _normalise(member.name))
                continue
            report.members += 1
            uid, gid = _shift(member.uid, uid_base, uid_count), _shift(member.gid, uid_base, uid_count)
            if uid is not None or gid is not None:
                report.host_uids_seen += 1
                report.shifted += 1
                if uid is not None:
                    member.uid = uid
                    member.pax_headers.pop("uid", None)  # a stale pax value would win over the field
                if gid is not None:
                    member.gid = gid
                    member.pax_headers.pop("gid", None)
            if member.isreg():
                writer.addfile(member, _Scanning(reader.extractfile(member), needles, member.name))
            else:
                writer.addfile(member)
    return report


def _sha256_file(path: Path) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return "sha256:" + digest.hexdigest(), size


def _blob(layout: Path, digest: str) -> Path:
    """A blob of a skopeo ``dir:`` layout: named by its hex digest."""
    return layout / digest.split(":", 1)[1]


def _write_blob(layout: Path, data: bytes) -> tuple[str, int]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    _blob(layout, digest).write_bytes(data)
    return digest, len(data)


def layout_fix(
    layout: Path,
    *,
    uid_base: int,
    uid_count: int,
    secrets: Iterable[str] = (),
    entrypoint: list[str] | None = None,
    cmd: list[str] | None = None,
) -> LayerReport:
    """Rewrite the top layer of the image in the ``dir:`` layout at ``layout`` (see the module's
    docstring), then its config and manifest, in place. Returns what the layer's rewrite did."""
    secrets = [s for s in secrets if s]
    manifest = json.loads((layout / "manifest.json").read_text())
    if not manifest.get("layers"):
        raise ImageSaveError("the committed image has no layers")
    config = json.loads(_blob(layout, manifest["config"]["digest"]).read_bytes())
    settings_ = config.setdefault("config", {})
    for value in [*(settings_.get("Env") or ()), *((settings_.get("Labels") or {}).values())]:
        if any(secret in str(value) for secret in secrets):
            raise ImageSaveError("the image's environment holds one of the console's tokens for this instance")
    labels = {k: v for k, v in (settings_.get("Labels") or {}).items() if k not in CONSOLE_LABELS}
    settings_["Labels"] = labels or None
    if entrypoint is not None:
        settings_["Entrypoint"] = entrypoint or None
    if cmd is not None:
        settings_["Cmd"] = cmd or None

    top = manifest["layers"][-1]
    source = _blob(layout, top["digest"])
    fixed = layout / "top-layer.tar"
    with open(source, "rb") as raw:
        head = raw.read(2)
        raw.seek(0)
        stream: BinaryIO = gzip.GzipFile(fileobj=raw) if head == b"\x1f\x8b" else raw  # type: ignore[assignment]
        with open(fixed, "wb") as out:
            report = layer_rewrite(stream, out, uid_base=uid_base, uid_count=uid_count, secrets=secrets)
    digest, size = _sha256_file(fixed)
    source.unlink()
    shutil.move(fixed, _blob(layout, digest))
    oci = manifest.get("mediaType", OCI_MANIFEST) == OCI_MANIFEST or "oci" in str(top.get("mediaType"))
    manifest["layers"][-1] = {"mediaType": OCI_LAYER_TAR if oci else DOCKER_LAYER_TAR, "digest": digest, "size": size}
    config.setdefault("rootfs", {"type": "layers", "diff_ids": []})
    diff_ids = config["rootfs"].setdefault("diff_ids", [])
    if diff_ids:
        diff_ids[-1] = digest  # uncompressed: the layer's digest is its diff_id
    else:
        diff_ids.append(digest)
    old_config = _blob(layout, manifest["config"]["digest"])
    config_digest, config_size = _write_blob(layout, json.dumps(config, separators=(",", ":")).encode())
    if old_config != _blob(layout, config_digest):
        old_config.unlink(missing_ok=True)
    manifest["config"] = {**manifest["config"], "digest": config_digest, "size": config_size}
    (layout / "manifest.json").write_text(json.dumps(manifest, separators=(",", ":")))
    return report


def pulled_bytes(manifest: Mapping, manifest_length: int) -> int:
    """What pulling an image fetches: its manifest, config and layers as the registry stores them."""
    blobs = [manifest.get("config") or {}, *(manifest.get("layers") or [])]
    return manifest_length + sum(int(blob.get("size") or 0) for blob in blobs)


# --- the fast path: the container's own layer, read from podman's store, pushed beside its base ----------

OPAQUE_XATTR = "trusted.overlay.opaque"
DOCKER_TO_OCI = {
    "application/vnd.docker.distribution.manifest.v2+json": OCI_MANIFEST,
    "application/vnd.docker.container.image.v1+json": OCI_CONFIG,
    "application/vnd.docker.image.rootfs.diff.tar.gzip": "application/vnd.oci.image.layer.v1.tar+gzip",
    DOCKER_LAYER_TAR: OCI_LAYER_TAR,
}


class _Hashing:
    """A file written through: its sha256 and size as it goes."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle, self.sha, self.size = handle, hashlib.sha256(), 0

    def write(self, data) -> int:
        self.sha.update(data)
        self.size += len(data)
        return self.handle.write(data)

    @property
    def digest(self) -> str:
        return "sha256:" + self.sha.hexdigest()


def upper_layer_write(
    upper: Path, out: BinaryIO, *, uid_base: int, uid_count: int, secrets: Iterable[str] = ()
) -> tuple[LayerReport, str, int]:
    """The OCI layer (an uncompressed tar) of an overlay upper directory: what the container changed.

    Overlay's whiteouts (character devices 0/0) become ``.wh.<name>`` files, an opaque directory
    (``trusted.overlay.opaque=y``) gets ``.wh..wh..opq``; uids and gids of the tenant's host range are
    shifted back, the console's paths dropped and a member holding a token refused, as ``layer_rewrite``
    does. The kernel's overlay must not use metacopy or redirect_dir (their upper files are not whole):
    the caller checks. Returns the report, the layer's digest (its diff_id) and size."""
    needles = [s.encode() for s in secrets if s]
    report = LayerReport()
    hashing = _Hashing(out)
    with tarfile.open(fileobj=hashing, mode="w|", format=tarfile.PAX_FORMAT) as writer:  # type: ignore[arg-type]
        for folder, dirs, files in os.walk(upper):
            dirs.sort()
            for name in sorted(dirs) + sorted(files):
                path = os.path.join(folder, name)
                arcname = os.path.relpath(path, upper)
                if _dropped(arcname):
                    report.dropped.append("/" + arcname)
                    if name in dirs:
                        dirs.remove(name)
                    continue
                info = os.lstat(path)
                if stat.S_ISCHR(info.st_mode) and info.st_rdev == 0:  # a whiteout: deleted in the container
                    whiteout = tarfile.TarInfo(os.path.join(os.path.dirname(arcname), ".wh." + name))
                    writer.addfile(whiteout)
                    report.members += 1
                    continue
                member = writer.gettarinfo(path, arcname)
                if member is None:  # a socket: nothing a layer can hold
                    continue
                member.uname = member.gname = ""
                for attribute in ("uid", "gid"):
                    shifted = _shift(getattr(member, attribute), uid_base, uid_count)
                    if shifted is not None:
                        setattr(member, attribute, shifted)
                        report.shifted += attribute == "uid"
                        report.host_uids_seen += attribute == "uid"
                report.members += 1
                if member.isreg():
                    with open(path, "rb") as data:
                        writer.addfile(member, _Scanning(data, needles, arcname))
                else:
                    writer.addfile(member)
                if stat.S_ISDIR(info.st_mode):
                    try:
                        opaque = os.getxattr(path, OPAQUE_XATTR, follow_symlinks=False) == b"y"
                    except OSError:
                        opaque = False
                    if opaque:
                        writer.addfile(tarfile.TarInfo(os.path.join(arcname, ".wh..wh..opq")))
    return report, hashing.digest, hashing.size


def manifest_with_layer(
    manifest: Mapping, config: Mapping, *, layer_digest: str, layer_size: int, drop_labels: bool = True
) -> tuple[dict, bytes]:
    """The base image's manifest and config with one more (uncompressed) layer on top, as OCI: returns
    the new manifest (its config descriptor still to be filled in) and the new config's bytes."""
    config = json.loads(json.dumps(config))
    settings_ = config.setdefault("config", {})
    if drop_labels and settings_.get("Labels"):
        settings_["Labels"] = {k: v for k, v in settings_["Labels"].items() if k not in CONSOLE_LABELS} or None
    config.setdefault("rootfs", {"type": "layers", "diff_ids": []}).setdefault("diff_ids", []).append(layer_digest)
    config.setdefault("history", []).append({"created_by": "gpu-console: save as image"})
    config_bytes = json.dumps(config, separators=(",", ":")).encode()
    layers = [
        {**layer, "mediaType": DOCKER_TO_OCI.get(layer.get("mediaType", ""), layer.get("mediaType"))}
        for layer in manifest.get("layers") or []
    ]
    layers.append({"mediaType": OCI_LAYER_TAR, "digest": layer_digest, "size": layer_size})
    new = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {
            "mediaType": OCI_CONFIG,
            "digest": "sha256:" + hashlib.sha256(config_bytes).hexdigest(),
            "size": len(config_bytes),
        },
        "layers": layers,
    }
    return new, config_bytes
