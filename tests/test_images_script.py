"""scripts/images.py reads each image's ``images/<name>/image.toml`` ``[build]`` table: the parent built
first, ``on_request`` images left out of a plain ``make images``, and ``[build.contents]`` commands run in
the built image, their output merged into the manifest's ``contents`` (no podman needed: a recording one)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _images():
    spec = importlib.util.spec_from_file_location("console_images_script", ROOT / "scripts/images.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _RecordingPodman:
    """Answers ``podman run … -c <script>`` as the built pytorch image would."""

    def __init__(self):
        self.commands = []

    def run(self, *args, check=True, timeout=None):
        command = args[-1]
        self.commands.append(command)
        if "os_release" in command:
            out = json.dumps({"os": "Debian GNU/Linux 12 (bookworm)", "python": "3.11.2", "jupyterlab": "4.6.6"})
        elif "cudnn" in command:
            return subprocess.CompletedProcess(args, 1, "", "AttributeError")
        else:
            out = {"import torch; print(torch.__version__)": "2.5.1+cu124"}.get(command, "12.4")
        return subprocess.CompletedProcess(args, 0, out + "\n", "")


def test_the_python_and_pytorch_tiers_build_on_request_on_their_parents():
    images = _images()
    assert images.REFS["python"] == "localhost/console/python:latest"
    assert images.REFS["pytorch"] == "localhost/console/pytorch:latest"
    # A plain `make images`: the app images too (the CPU chat's llama-server, MLflow), on the base.
    assert images.default_names() == ["base", "minimal", "minimal-alt", "llama-server", "mlflow"]
    assert images.parent_of("llama-server") == images.parent_of("mlflow") == "base"
    assert images.parent_of("pytorch") == "python"
    assert images.parent_of("python") == "minimal"
    assert images.parent_of("minimal-alt") == "minimal"  # no image.toml: its FROM line


def test_the_build_contents_commands_join_the_manifests_contents():
    images = _images()
    podman = _RecordingPodman()
    found = images.contents(podman, images.REFS["pytorch"])
    assert found == {
        "os": "Debian GNU/Linux 12 (bookworm)",
        "python": "3.11.2",
        "jupyterlab": "4.6.6",
        "torch": "2.5.1+cu124",
        "cuda": "12.4",
        "cudnn": None,  # the command failed: nothing to say
    }
    assert "import torch; print(torch.version.cuda)" in podman.commands
    assert images.contents(_RecordingPodman(), images.REFS["minimal"]).keys() == {"os", "python", "jupyterlab"}


class _InspectingPodman:
    """Knows one parent image; records the build's arguments."""

    def __init__(self, tmp_path):
        self.conf_dir = tmp_path
        self.calls = []

    def inspect(self, kind, ref):
        return {"Id": "parent-id"} if ref.endswith("base:bookworm") else None

    def run(self, *args, check=True, timeout=None):
        self.calls.append(args)
        return subprocess.CompletedProcess(args, 0, "", "")


def test_a_build_context_is_made_by_its_command_passed_to_the_build_and_hashed_into_the_inputs(tmp_path, monkeypatch):
    images = _images()
    folder = tmp_path / "llama"
    folder.mkdir()
    (folder / "llama-server").write_bytes(b"binary v1")
    script = tmp_path / "context.sh"
    script.write_text(f"#!/bin/sh\necho building >&2\necho {folder}\n")
    script.chmod(0o755)
    monkeypatch.setattr(images, "build_config", lambda name: {"contexts": {"llama": [str(script)]}})
    contexts = images.build_contexts("llama-server")
    assert contexts == {"llama": folder}
    podman = _InspectingPodman(tmp_path)
    first = images.inputs_hash(podman, "llama-server", contexts)
    assert first == images.inputs_hash(podman, "llama-server", contexts)
    (folder / "llama-server").write_bytes(b"binary v2")  # a rebuilt server is a new image
    assert images.inputs_hash(podman, "llama-server", contexts) != first

    images.build_containerfile(podman, "llama-server", "hash", contexts)
    args = podman.calls[-1]
    assert args[args.index("--build-context") + 1] == f"llama={folder}"

    script.write_text("#!/bin/sh\necho 'cmake not found' >&2\nexit 1\n")  # the server cannot be built
    try:
        images.build_contexts("llama-server")
    except images.PodmanError as exc:
        assert "llama" in str(exc)
    else:
        raise AssertionError("a context whose command fails must fail the image's build")
