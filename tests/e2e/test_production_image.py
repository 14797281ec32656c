"""The production image (deploy/Dockerfile), built and started where a container engine can build it:
it starts, answers /readyz, and refuses the demo parts.

No registry outside this machine can be reached here, so the base is a Debian trixie image made from
Debian's packages (mmdebstrap, as `make images` makes its bookworm base; shared/notes/containers.md),
tagged localhost/console/base:trixie and kept; pip reaches PyPI with the machine's CA bundle as a build
secret. The image runs on the host's network, on the tests' PostgreSQL and Redis, with a database of
its own. Skips, saying why, where podman (`make container-deps`) or mmdebstrap is missing or a build
cannot run.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest

from providers.local.runtime.podman import Podman
from tests.e2e.conftest import free_port
from tests.security.test_production_refuses_demo_parts import REAL_BACKENDS, REAL_GATEWAY, REAL_MAIL

pytestmark = [pytest.mark.e2e, pytest.mark.containers, pytest.mark.timeout(1800)]
ROOT = Path(__file__).resolve().parents[2]
BASE = "localhost/console/base:trixie"
IMAGE = "localhost/console/app:smoke"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
DB_NAME = "console_e2e_image"
SERVER = urlsplit(os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:54328/console")


def debian_mirror() -> str:
    """This machine's Debian mirror (the URI of its apt sources), for trixie."""
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*.sources"))]:
        try:
            text = path.read_text()
        except OSError:
            continue
        match = re.search(r"^URIs:\s*(\S+/debian)\s*$", text, flags=re.M) or re.search(
            r"^deb\s+(\S+/debian)\s", text, flags=re.M
        )
        if match:
            return match.group(1)
    return "http://deb.debian.org/debian"


def _run(podman: Podman, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [podman.binary, *args], env=podman.env(), cwd=podman.workdir, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def podman() -> Podman:
    engine = Podman()
    why = engine.missing()
    if why:
        pytest.skip(f"no container engine to build the image: {why}")
    if shutil.which("mmdebstrap") is None:
        pytest.skip("mmdebstrap is not installed (make container-deps): no Debian base can be made here")
    return engine


@pytest.fixture(scope="module")
def image(podman: Podman) -> str:
    if _run(podman, "image", "exists", BASE).returncode != 0:
        with tempfile.TemporaryDirectory() as tmp:
            tarball = Path(tmp) / "base.tar"
            made = subprocess.run(
                [
                    "mmdebstrap",
                    "--variant=minbase",
                    "--include=ca-certificates",
                    "trixie",
                    str(tarball),
                    debian_mirror(),
                ],
                capture_output=True,
                text=True,
                timeout=900,
            )
            if made.returncode != 0:
                pytest.skip(f"mmdebstrap could not make a trixie base: {made.stderr.strip()[-400:]}")
            imported = _run(podman, "import", "--change", 'CMD ["/bin/bash"]', str(tarball), BASE)
            assert imported.returncode == 0, imported.stderr
    build = _run(
        podman,
        "build",
        "-f",
        str(ROOT / "deploy" / "Dockerfile"),
        "--build-arg",
        f"BASE={BASE}",
        *(["--secret", f"id=ca,src={CA_BUNDLE}"] if CA_BUNDLE.is_file() else []),
        "-t",
        IMAGE,
        str(ROOT),
        timeout=1500,
    )
    if build.returncode != 0 and "network" in build.stderr.lower() and "pypi" in build.stderr.lower():
        pytest.skip(f"the image's pip could not reach PyPI: {build.stderr.strip()[-400:]}")
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    return IMAGE


@pytest.fixture(scope="module")
def database() -> str:
    admin = urlunsplit(SERVER._replace(path="/postgres"))
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{DB_NAME}"')
    except psycopg.OperationalError as exc:
        pytest.skip(f"needs the tests' PostgreSQL at {admin}: {exc}")
    return urlunsplit(SERVER._replace(path=f"/{DB_NAME}"))


def production_env(database: str, **extra: str) -> list[str]:
    redis = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    env = {
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "CONSOLE_PROXY_HOST": "apps.localhost",
        "DJANGO_SECURE_SSL_REDIRECT": "0",
        "DATABASE_URL": database,
        "REDIS_URL": redis,
        **extra,
    }
    return [arg for name, value in env.items() for arg in ("-e", f"{name}={value}")]


def test_the_image_refuses_demo_parts(podman, image, database):
    # Production by default (the Dockerfile's CONSOLE_ENV), and the simulated cloud is the default backend.
    result = _run(
        podman, "run", "--rm", "--network", "host", *production_env(database), image, "python", "manage.py", "check"
    )
    assert result.returncode != 0, result.stdout
    assert "CONSOLE_ENV=production refuses to run demo parts" in result.stderr


def test_the_image_starts_and_is_ready(podman, image, database):
    real = production_env(database, CONSOLE_PROVISIONING_BACKENDS=REAL_BACKENDS, **REAL_GATEWAY, **REAL_MAIL)
    migrated = _run(
        podman, "run", "--rm", "--network", "host", *real, image, "python", "manage.py", "migrate", "--noinput"
    )
    assert migrated.returncode == 0, migrated.stdout[-2000:] + migrated.stderr[-2000:]
    port = free_port()
    name = f"console-smoke-{port}"
    started = _run(
        podman, "run", "-d", "--name", name, "--network", "host", *real, image,
        "uvicorn", "console.asgi:application", "--host", "127.0.0.1", "--port", str(port),
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    try:
        deadline = time.monotonic() + 120
        answer = None
        while time.monotonic() < deadline:
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
                break
            except httpx.TransportError:
                if _run(podman, "container", "exists", name).returncode != 0:
                    break
                time.sleep(0.5)
        logs = _run(podman, "logs", name).stderr[-3000:]
        assert answer is not None, f"the image's web server never answered: {logs}"
        assert answer.status_code == 200, answer.text + logs
        assert (
            _run(podman, "exec", name, "python", "-c", "import sys; print(sys.version_info[:2])").stdout.strip()
            == "(3, 13)"
        )
        assert _run(podman, "exec", name, "id", "-un").stdout.strip() == "console"
    finally:
        _run(podman, "rm", "-f", "-t", "2", name)
