"""A saved image's top layer is fixed before it is pushed, without podman: uids of the tenant's host
range go back to the image's own, the console's paths are dropped, a token is refused, and the config
and manifest name the new layer (``providers.local.runtime.image_save``)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import tarfile
from pathlib import Path

import pytest

from providers.local.runtime.image_save import ImageSaveError, layer_rewrite, layout_fix, upper_layer_write

BASE = 200000
TOKEN = "lab-token-0123456789abcdef"


def _tar(members: list[tuple[str, int, bytes | None]]) -> bytes:
    """A layer as podman 4.x commits it: (name, host uid, data or None for a folder)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, uid, data in members:
            info = tarfile.TarInfo(name)
            info.uid = info.gid = uid
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _members(data: bytes) -> dict[str, tuple[int, int, bytes | None]]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {
            m.name: (m.uid, m.gid, tar.extractfile(m).read() if m.isreg() else None)  # type: ignore[union-attr]
            for m in tar.getmembers()
        }


def test_host_uids_are_shifted_back_to_the_images_own():
    layer = _tar([("opt/venv/", BASE, None), ("opt/venv/pkg.py", BASE + 1000, b"print(1)\n"), ("usr/bin/x", 0, b"x")])
    out = io.BytesIO()
    report = layer_rewrite(io.BytesIO(layer), out, uid_base=BASE, uid_count=65536)
    members = _members(out.getvalue())
    assert members["opt/venv/pkg.py"] == (1000, 1000, b"print(1)\n")
    assert members["opt/venv"][:2] == (0, 0)
    assert members["usr/bin/x"][:2] == (0, 0)  # already the image's own: untouched
    assert report.shifted == 2


def test_the_consoles_paths_and_host_keys_never_go_in():
    layer = _tar(
        [
            ("run/", BASE, None),
            ("run/console-secrets/lab_token", BASE, b"secret"),
            ("run/console-hostkeys/ssh_host_ed25519_key", BASE, b"key"),
            ("tmp/scratch", BASE, b"x"),
            ("etc/ssh/ssh_host_ed25519_key", BASE, b"key"),
            ("etc/hostname", BASE, b"box"),
        ]
    )
    out = io.BytesIO()
    report = layer_rewrite(io.BytesIO(layer), out, uid_base=BASE, uid_count=65536)
    assert sorted(_members(out.getvalue())) == ["etc/hostname", "run"]
    assert "/run/console-secrets/lab_token" in report.dropped


def test_a_file_holding_the_instances_token_is_refused():
    layer = _tar([("opt/notes.txt", BASE, b"x" * (1 << 20) + TOKEN.encode() + b"\n")])
    with pytest.raises(ImageSaveError, match=r"/opt/notes\.txt"):
        layer_rewrite(io.BytesIO(layer), io.BytesIO(), uid_base=BASE, uid_count=65536, secrets=[TOKEN])


def _layout(tmp_path: Path, layer: bytes, config: dict) -> Path:
    layout = tmp_path / "layout"
    layout.mkdir()
    base_layer = _tar([("etc/os-release", 0, b"Debian\n")])
    blobs = {}
    for data in (base_layer, layer):
        digest = hashlib.sha256(data).hexdigest()
        (layout / digest).write_bytes(data)
        blobs[data] = f"sha256:{digest}"
    config["rootfs"] = {"type": "layers", "diff_ids": [blobs[base_layer], blobs[layer]]}
    config_bytes = json.dumps(config).encode()
    (layout / hashlib.sha256(config_bytes).hexdigest()).write_bytes(config_bytes)
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": "sha256:" + hashlib.sha256(config_bytes).hexdigest(),
            "size": len(config_bytes),
        },
        "layers": [
            {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": blobs[d], "size": len(d)}
            for d in (base_layer, layer)
        ],
    }
    (layout / "manifest.json").write_text(json.dumps(manifest))
    return layout


def test_the_layout_names_the_fixed_layer_and_keeps_the_images_own_entrypoint(tmp_path):
    layer = _tar([("opt/venv/pkg.py", BASE + 1000, b"print(1)\n")])
    config = {
        "config": {
            "Env": ["PATH=/opt/venv/bin:/usr/bin"],
            "Entrypoint": ["/opt/console/tini", "-g", "--", "/opt/console/console-start"],
            "Labels": {"org.gpu-console.instance": "abc", "org.gpu-console.contract": "1"},
        }
    }
    layout = _layout(tmp_path, layer, config)
    layout_fix(layout, uid_base=BASE, uid_count=65536, entrypoint=[], cmd=["/bin/bash"])
    manifest = json.loads((layout / "manifest.json").read_text())
    top = manifest["layers"][-1]
    fixed = (layout / top["digest"].split(":")[1]).read_bytes()
    assert "sha256:" + hashlib.sha256(fixed).hexdigest() == top["digest"]
    assert _members(fixed)["opt/venv/pkg.py"][:2] == (1000, 1000)
    config_bytes = (layout / manifest["config"]["digest"].split(":")[1]).read_bytes()
    written = json.loads(config_bytes)
    assert written["rootfs"]["diff_ids"][-1] == top["digest"]
    assert written["config"]["Entrypoint"] is None
    assert written["config"]["Cmd"] == ["/bin/bash"]
    assert written["config"]["Labels"] == {"org.gpu-console.contract": "1"}
    assert not (layout / hashlib.sha256(layer).hexdigest()).exists()  # the unfixed layer is gone


def test_a_token_in_the_images_environment_is_refused(tmp_path):
    layout = _layout(tmp_path, _tar([("a", 0, b"a")]), {"config": {"Env": [f"JUPYTER_TOKEN={TOKEN}"]}})
    with pytest.raises(ImageSaveError, match="environment"):
        layout_fix(layout, uid_base=BASE, uid_count=65536, secrets=[TOKEN])


@pytest.mark.skipif(os.geteuid() != 0, reason="whiteouts (character devices 0/0) and trusted.* xattrs need root")
def test_an_overlay_upper_folder_becomes_a_layer_with_whiteouts_and_opaque_folders(tmp_path):
    upper = tmp_path / "upper"
    (upper / "opt/venv").mkdir(parents=True)
    (upper / "opt/venv/pkg.py").write_text("print(1)\n")
    os.chown(upper / "opt/venv/pkg.py", BASE + 1000, BASE + 1000)
    (upper / "etc").mkdir()
    os.mknod(upper / "etc/debian_version", 0o600 | stat.S_IFCHR, os.makedev(0, 0))  # deleted in the container
    (upper / "usr/share/doc").mkdir(parents=True)
    os.setxattr(upper / "usr/share/doc", "trusted.overlay.opaque", b"y")  # removed, then made again
    (upper / "run/console-secrets").mkdir(parents=True)
    (upper / "run/console-secrets/lab_token").write_text(TOKEN)
    out = io.BytesIO()
    report, digest, size = upper_layer_write(upper, out, uid_base=BASE, uid_count=65536, secrets=[TOKEN])
    data = out.getvalue()
    assert digest == "sha256:" + hashlib.sha256(data).hexdigest() and size == len(data)
    members = _members(data)
    assert members["opt/venv/pkg.py"] == (1000, 1000, b"print(1)\n")
    assert members["etc/.wh.debian_version"] == (0, 0, b"")
    assert "usr/share/doc/.wh..wh..opq" in members and "etc/debian_version" not in members
    assert "run" in members and not any(name.startswith("run/") for name in members)
    assert report.shifted == 1


def test_the_owners_secrets_in_the_folder_are_looked_for_as_the_servers_tokens_are(tmp_path):
    from providers.local.runtime.containers import ContainerRuntime

    runtime = ContainerRuntime(root=tmp_path)
    folder = runtime.paths("k1").secrets
    folder.mkdir(parents=True)
    (folder / "WANDB_API_KEY").write_text("wandb-0123456789abcdef\n")
    (folder / "SHORT").write_text("abc")  # too common a string to look for
    (folder / "user.env").write_text("export WANDB_API_KEY='wandb-0123456789abcdef'\n")
    (folder / "lab_token").write_text(TOKEN)  # the servers' own: from the metadata
    values = runtime._secret_values("k1", {"secrets": {"lab": TOKEN}})
    assert sorted(values) == sorted([TOKEN, "wandb-0123456789abcdef"])
