"""The host's public models and datasets appear read-only in every local instance, at the catalogues'
paths (/models/<org>/<name>, /datasets/…); a volume the user mounts at or under such a path takes it."""

from __future__ import annotations

import os

import pytest

from providers.local.runtime.supervisor import Mount
from providers.local.tests.local_helpers import runtime_or_skip


@pytest.fixture
def public(tmp_path):
    models, datasets = tmp_path / "public/models", tmp_path / "public/datasets"
    (models / "Qwen/Qwen2.5-0.5B").mkdir(parents=True)
    (models / "Qwen/Qwen2.5-0.5B/config.json").write_text('{"hidden_size": 896}')
    datasets.mkdir(parents=True)
    return {"/models": str(models), "/datasets": str(datasets)}


def test_every_instance_reads_the_public_models_and_cannot_change_them(tmp_path, public):
    runtime = runtime_or_skip(tmp_path / "instances", services=(), public_mounts=public)
    runtime.start("box")
    home = runtime.paths("box").home
    assert (home / "models/Qwen/Qwen2.5-0.5B/config.json").read_text() == '{"hidden_size": 896}'
    assert (home / "datasets").is_dir()
    env = runtime._environment("box", runtime.paths("box"), runtime.meta("box"))
    assert env["CONSOLE_VOLUME_MODELS"] == str(home / "models")
    mounted = {m["path"]: m for m in runtime.mounts("box")}
    assert mounted["/models"]["read_only"] and mounted["/datasets"]["read_only"]
    if mounted["/models"]["enforced"]:
        with pytest.raises(OSError):
            (home / "models/Qwen/Qwen2.5-0.5B/config.json").write_text("tampered")
    runtime.destroy("box")
    # Destroying the instance unmounts first: the public files are untouched.
    assert os.path.exists(os.path.join(public["/models"], "Qwen/Qwen2.5-0.5B/config.json"))


def test_a_volume_under_a_public_path_takes_it(tmp_path, public):
    runtime = runtime_or_skip(tmp_path / "instances", services=(), public_mounts=public)
    volume = runtime.volume_create("vol-1")
    (volume / "mine.txt").write_text("mine")
    runtime.start("box", mounts=[Mount(source=str(volume), path="/models/mine", read_only=False)])
    home = runtime.paths("box").home
    assert (home / "models/mine/mine.txt").read_text() == "mine"
    assert not (home / "models/Qwen").exists()  # /models is the volume's parent now, not the public one
    assert (home / "datasets").is_dir()  # the other public path is still there
    runtime.destroy("box")
