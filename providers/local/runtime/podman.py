"""How the console calls podman: its own configuration (``var/containers``), a private working
directory, and errors that say what podman said.

``scripts/container-deps.sh`` installs podman (with runc) and writes ``containers.conf`` and
``storage.conf`` under ``var/containers``; every call made here points podman at them through
``CONTAINERS_CONF`` and ``CONTAINERS_STORAGE_CONF``, so the host's own ``/etc/containers`` is never
read or changed. Calls run in a private directory: after an OOM kill conmon writes a file named
``oom`` into its caller's working directory. No Django here: ``scripts/images.py`` uses it too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_CONF_DIR = PROJECT_ROOT / "var" / "containers"


class PodmanError(Exception):
    """podman failed; the message is podman's own last line (plain enough to show an owner)."""

    def __init__(self, message: str, *, returncode: int = 1, stderr: str = "") -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr


class Podman:
    def __init__(self, *, conf_dir: str | os.PathLike = "", binary: str = "podman", timeout: float = 120.0) -> None:
        self.conf_dir = Path(conf_dir or os.environ.get("CONSOLE_CONTAINERS_DIR", "") or DEFAULT_CONF_DIR)
        self.binary = binary
        self.timeout = timeout

    # --- setup ------------------------------------------------------------------------------------

    def missing(self) -> str:
        """Why podman cannot run here ("" when it can): not installed, or its configuration not written."""
        if shutil.which(self.binary) is None:
            return "podman is not installed (run `make container-deps`)"
        if shutil.which("runc") is None:
            return "runc is not installed (run `make container-deps`)"
        if not (self.conf_dir / "containers.conf").is_file() or not (self.conf_dir / "storage.conf").is_file():
            return f"podman's configuration is missing under {self.conf_dir} (run `make container-deps`)"
        return ""

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "CONTAINERS_CONF": str(self.conf_dir / "containers.conf"),
            "CONTAINERS_STORAGE_CONF": str(self.conf_dir / "storage.conf"),
            "TMPDIR": str(self.conf_dir / "tmp"),
        }

    @property
    def workdir(self) -> Path:
        path = self.conf_dir / "cwd"
        path.mkdir(parents=True, exist_ok=True)
        return path

    # --- calls ------------------------------------------------------------------------------------

    def run(
        self, *args: str, check: bool = True, timeout: float | None = None, input: str | None = None
    ) -> subprocess.CompletedProcess:
        try:
            result = subprocess.run(  # noqa: S603
                [self.binary, *args],
                capture_output=True,
                text=True,
                env=self.env(),
                cwd=self.workdir,
                timeout=timeout or self.timeout,
                input=input,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise PodmanError(f"podman {args[0]} did not finish in {exc.timeout:.0f} s") from exc
        except FileNotFoundError as exc:
            raise PodmanError("podman is not installed (run `make container-deps`)") from exc
        if check and result.returncode != 0:
            raise PodmanError(
                last_words(result.stderr) or f"podman {args[0]} failed",
                returncode=result.returncode,
                stderr=result.stderr,
            )
        return result

    def popen(self, args: Sequence[str], *, log: Path, tmpdir: Path | None = None) -> subprocess.Popen:
        """A podman command in the background (a pull), its output in ``log``; ``tmpdir``: where it
        downloads (a pull's blobs land there before they are applied, so their size is its progress)."""
        env = self.env()
        if tmpdir is not None:
            tmpdir.mkdir(parents=True, exist_ok=True)
            env["TMPDIR"] = str(tmpdir)
        with open(log, "wb") as out:
            return subprocess.Popen(  # noqa: S603
                [self.binary, *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.workdir,
                start_new_session=True,
            )

    def inspect(self, kind: str, name: str) -> dict | None:
        """``podman <kind> inspect name`` as a dict, or None when there is no such object."""
        result = self.run(kind, "inspect", name, check=False)
        if result.returncode != 0:
            return None
        try:
            data = json.loads(result.stdout)
        except json.JSONDecodeError:
            return None
        return data[0] if isinstance(data, list) and data else None

    def image_exists(self, ref: str) -> bool:
        return self.run("image", "exists", ref, check=False).returncode == 0

    def container_exists(self, name: str) -> bool:
        return self.run("container", "exists", name, check=False).returncode == 0

    def remove(self, name: str, *, attempts: int = 4) -> None:
        """Remove a container, stopping it first; "no such container" is done.

        ``rm -f`` sometimes fails with ``unlinkat …/userdata/shm: device or resource busy`` on these
        hosts: stop, then remove, and try again."""
        for attempt in range(attempts):
            if not self.container_exists(name):
                return
            self.run("stop", "-t", "3", name, check=False)
            result = self.run("rm", "-f", "-v", name, check=False)
            if result.returncode == 0 or not self.container_exists(name):
                return
            time.sleep(0.2 * (attempt + 1))  # wall-clock: the kernel releases the busy mount shortly after
        raise PodmanError(f"container {name} could not be removed: {last_words(result.stderr)}")


def last_words(stderr: str) -> str:
    """podman's error, on one line, without its "Error: " prefix."""
    lines = [line.strip() for line in (stderr or "").splitlines() if line.strip()]
    if not lines:
        return ""
    text = lines[-1]
    for prefix in ("Error: ", "error: "):
        text = text.removeprefix(prefix)
    return text[:400]
