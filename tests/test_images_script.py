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
    assert images.default_names() == ["base", "minimal", "minimal-alt"]  # a plain `make images`
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
