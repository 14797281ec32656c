"""Every package whose tests are in the repository is in pytest's ``testpaths``: `make test` collects
only those, and identity's and privacy's tests once went unrun for weeks because they were not listed."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IGNORED = {"var", "node_modules", "static"}


def test_every_package_with_tests_is_in_testpaths():
    testpaths = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["testpaths"])
    with_tests = {
        top.name
        for top in ROOT.iterdir()
        if top.is_dir()
        and not top.name.startswith(".")
        and top.name not in IGNORED
        and any("tests" in found.relative_to(ROOT).parts[:-1] for found in top.rglob("test_*.py"))
    }
    assert with_tests - testpaths == set()
