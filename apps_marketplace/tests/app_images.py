"""The marketplace's own app images (images/llama-server, images/mlflow), built by ``make images`` and
run by the local backend's container engine, for the tests that deploy them for real."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LLAMA = "localhost/console/llama-server:latest"
MLFLOW = "localhost/console/mlflow:latest"
# The catalogue slugs of those images (images/<name>/image.toml), which the host maps to its local ones.
IMAGES = {"llama-server-cpu": LLAMA, "mlflow-server": MLFLOW}
# Wall-clock: a container's first start on a busy 2-core CI host (MLflow's server takes 10-30 s there).
BOOT_S = 240


def _images_script():
    spec = importlib.util.spec_from_file_location("console_images_for_apps", ROOT / "scripts/images.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def app_image_or_skip(name: str) -> dict:
    """Build (cached: a second) the app image ``name``, or skip saying why it cannot exist here: no
    podman, or (llama-server) no compiler, cmake or npm to build the server. `make test` builds them
    first (`make images`, which depends on `make llama-server`)."""
    from providers.local.runtime.podman import Podman, PodmanError

    podman = Podman()
    if podman.missing():
        pytest.skip(podman.missing())
    if name == "llama-server":
        # The server is compiled by `make llama-server` (a prerequisite of `make test`), never by a test:
        # without it, that build failed here (no compiler, cmake or npm) and said why.
        built = subprocess.run([str(ROOT / "scripts/llama-server.sh"), "path"], capture_output=True, check=False)
        if built.returncode != 0:
            pytest.skip(
                "llama-server is not built on this host: `make llama-server` (needs cmake, a C++ compiler, npm)"
            )
    images = _images_script()
    try:
        return images.build([name], podman=podman, quiet=True)[name]
    except (PodmanError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"the {name} image could not be built here (make llama-server images): {exc}")


def in_app_containers(this_host):
    """The local backend with the podman engine running only the deployments' app servers."""
    return this_host(
        services=(),
        ENGINE="podman",
        LIMITS={"CPUS": 2, "MEMORY_GB": 2, "MAX_MEMORY_GB": 4, "PIDS_LIMIT": 1024},
        IMAGES=IMAGES,
    )


def exec_as_user(backend, key: str, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """A command in the instance's container as its user (uid 1000), as the owner's terminal runs it."""
    return backend.runtime.podman.run(
        "exec", "--user", "1000", backend.runtime.container_name(key), *argv, check=False, timeout=timeout
    )
