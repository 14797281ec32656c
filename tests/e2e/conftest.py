"""The console as users start it: `make run` in a fresh clone, and the production install.

These tests start real processes from a clone of this repository's committed HEAD (what CI and a
newcomer get), so they see what the unit tests cannot: a missing requirement, a default setting that
fails, a process that dies. They need git, make, Debian's Chromium and network access to PyPI for
the clone's own virtualenvs (the pip cache makes later runs quick).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.e2e.flow import CHROMIUM

ROOT = Path(__file__).resolve().parents[2]
# Variables of the test run that must not leak into the console under test.
TEST_ONLY_ENV = (
    "CONSOLE_ENV",
    "DATABASE_URL",
    "REDIS_URL",
    "TEST_REDIS_URL",
    "DJANGO_SETTINGS_MODULE",
    "DJANGO_ALLOW_ASYNC_UNSAFE",
    "CELERY_TASK_ALWAYS_EAGER",
    "VIRTUAL_ENV",
    "MAKEFLAGS",
    "MAKELEVEL",
    "MFLAGS",
    "PYTEST_ARGS",
    "PYTEST_CURRENT_TEST",
    "PYTEST_XDIST_WORKER",
)


def pytest_collection_modifyitems(config, items):
    reasons = []
    if not CHROMIUM.exists():
        reasons.append(f"{CHROMIUM} does not exist (make browser-deps)")
    if not shutil.which("git") or not (ROOT / ".git").exists():
        reasons.append("needs git and this repository's history to clone")
    if not reasons:
        return
    skip = pytest.mark.skip(reason="; ".join(reasons))
    for item in items:
        if "e2e" in item.keywords:
            item.add_marker(skip)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in TEST_ONLY_ENV}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    env.update(extra)
    return env


def wait_for_log(log: Path, text: str, timeout: float, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        if process is not None and process.poll() is not None:
            break
        time.sleep(0.5)
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-60:]) if log.exists() else "(no log)"
    raise AssertionError(f"{text!r} did not appear in {log} within {timeout:.0f} s; its end:\n{tail}")


@dataclass
class Console:
    url: str
    clone: Path
    log: Path
    process: subprocess.Popen | None = None
    gateway_port: int = 0  # the SSH gateway's (GATEWAY_PORT)
    settings_env: dict[str, str] = field(default_factory=dict)  # what finds its files (CONSOLE_VAR_DIR)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def manage(self, *args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> str:
        """``manage.py`` in the clone, with its own virtualenv, against this console's servers."""
        result = subprocess.run(
            [str(self.clone / ".venv/bin/python"), "manage.py", *args],
            cwd=self.clone,
            env=env or clean_env(**self.settings_env),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout


@pytest.fixture(scope="session")
def clone() -> Iterator[Path]:
    """A fresh clone of HEAD in a folder other accounts can pass through: the private PostgreSQL runs as
    an account of its own when the tests run as root, and reads its binaries and data there. (Not under
    pytest's tmp_path: pytest makes its folders mode 700 again as it creates new ones.)"""
    base = Path(tempfile.mkdtemp(prefix="gpu-console-e2e-"))
    base.chmod(0o755)
    target = base / "gpu-console"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(target)], check=True)
    yield target
    shutil.rmtree(base, ignore_errors=True)


@contextmanager
def make_run(clone: Path, log: Path, **extra_env: str) -> Iterator[Console]:
    """`make run` exactly as the README says, in the background; Ctrl-C (SIGINT to its group) at the end."""
    port = free_port()
    gateway_port = free_port()
    env = clean_env(
        EMBEDDED_PG_PORT=str(free_port()),
        EMBEDDED_REDIS_PORT=str(free_port()),
        EMBEDDED_REGISTRY_PORT=str(free_port()),  # two consoles run at once (made_run, made_run_local)
        GATEWAY_PORT=str(gateway_port),
        **extra_env,
    )
    with log.open("w") as out:
        process = subprocess.Popen(
            ["make", "run", f"PORT={port}"],
            cwd=clone,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    console = Console(
        url=f"http://127.0.0.1:{port}/",
        clone=clone,
        log=log,
        process=process,
        gateway_port=gateway_port,
        settings_env=extra_env,
    )
    try:
        # A fresh clone creates its virtualenv first: minutes on a cold pip cache.
        wait_for_log(log, "GPU Console is running", timeout=900, process=process)
        yield console
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        sys.stdout.write(f"\n[make run log: {log}]\n")


@pytest.fixture(scope="session")
def made_run(clone, tmp_path_factory) -> Iterator[Console]:
    """`make run` in the clone, the simulated cloud its only provider."""
    with make_run(clone, tmp_path_factory.mktemp("e2e-logs") / "make-run.log") as console:
        yield console


@contextmanager
def local_deps_shared(clone: Path) -> Iterator[None]:
    """The clone finds the local backend's servers this checkout's `make local-deps` installed (`make test`
    runs it first): its var/local-deps is a link to them, so the clone's own `make local-deps` finds them
    in place in under a second instead of installing GBs again. Without them, the clone installs its own.
    The link goes again at the end."""
    installed = (ROOT / "var/local-deps").resolve()
    link = clone / "var/local-deps"
    made = installed.is_dir() and not link.exists() and not link.is_symlink()
    if made:
        link.parent.mkdir(exist_ok=True)
        link.symlink_to(installed, target_is_directory=True)
    try:
        yield
    finally:
        if made:
            link.unlink()


DESTROY_LOCAL_INSTANCES = """
from instances.models import Instance
from providers import get_backend
for instance in Instance.objects.filter(backend_alias="local"):
    get_backend("local").destroy(key=instance.key, state=instance.backend_state)
"""


@pytest.fixture(scope="module")
def made_run_local(clone, tmp_path_factory) -> Iterator[Console]:
    """`CONSOLE_LOCAL_BACKEND=1 make run` (README, "The local backend") in the same clone, beside any other
    `make run` there: its own port, private servers, files and instances' disks (CONSOLE_VAR_DIR)."""
    var = clone / "var-local-backend"
    log = tmp_path_factory.mktemp("e2e-logs") / "make-run-local.log"
    env = {"CONSOLE_LOCAL_BACKEND": "1", "CONSOLE_VAR_DIR": str(var), "LOCAL_RUNTIME_ROOT": str(var / "instances")}
    with local_deps_shared(clone), make_run(clone, log, **env) as console:
        if "could not all be installed" in console.log_text():
            pytest.skip("the local backend's servers could not be installed (make local-deps)")
        try:
            yield console
        finally:
            # A test that failed half-way leaves its instance running, and a local instance outlives the
            # console (as a cloud's machines do): destroy every one, through the provider's contract.
            console.manage("shell", stdin=DESTROY_LOCAL_INSTANCES)


# Module-scoped, and not pytest-playwright's `browser`: a sync Playwright keeps an asyncio loop running in
# this thread for as long as it lives, which must end before other modules' tests (and the ORM) run.
@pytest.fixture(scope="module")
def chromium():
    from playwright.sync_api import sync_playwright

    from tests.e2e.flow import CHROMIUM_ARGS

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def shots(tmp_path) -> Path:
    path = Path(os.environ.get("BROWSER_SCREENSHOT_DIR") or tmp_path)
    path.mkdir(parents=True, exist_ok=True)
    return path
