"""The dependency locks are current: each requirements*.txt is what `make lock` compiles from its
requirements*.in, checked offline (no index, no resolver) from what both files say.

- every package an input names is in its lock, at the version the input pins (a pin changed in an
  input and not recompiled fails here);
- every package the lock says an input asked for ("via -r requirements.in") is still in that input (a
  package removed from an input and not recompiled fails here);
- every pin in every lock carries hashes (pip's --require-hashes refuses the whole file otherwise);
- the run and dev locks install the very versions of the runtime lock (the tests run what production
  installs), since each input is constrained by the lock before it;
- the locks were compiled for the project's Python (.python-version).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCKS = {
    "requirements.in": "requirements.txt",
    "requirements-run.in": "requirements-run.txt",
    "requirements-dev.in": "requirements-dev.txt",
    "requirements-local.in": "requirements-local.txt",
}
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+?)\s*(\\)?\s*$")


def input_pins(name: str, seen: set[str] | None = None) -> dict[str, tuple[str, str]]:
    """{package: (version, the input file that names it)}, following ``-r`` (``-c`` only constrains)."""
    seen = seen if seen is not None else set()
    seen.add(name)
    pins: dict[str, tuple[str, str]] = {}
    for raw in (ROOT / name).read_text().splitlines():
        line = raw.split(" #")[0].strip()
        if not line or line.startswith("#") or line.startswith("-c "):
            continue
        if line.startswith("-r "):
            included = line[3:].strip()
            if included not in seen:
                pins.update(input_pins(included, seen))
            continue
        assert not line.startswith("-"), f"{name}: an option `make lock` does not expect: {line}"
        requirement = Requirement(line)
        specs = list(requirement.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", (
            f"{name}: {line!r}: inputs pin exact versions (a person decides an upgrade; `make lock` locks the rest)"
        )
        pins[canonicalize_name(requirement.name)] = (specs[0].version, name)
    return pins


def lock_entries(name: str) -> dict[str, dict]:
    """{package: {"version", "hashes", "via"}} from a pip-compile lock."""
    entries: dict[str, dict] = {}
    current: dict | None = None
    in_via = False
    for line in (ROOT / name).read_text().splitlines():
        match = PIN.match(line)
        if match:
            current = {"version": match.group(2), "hashes": 0, "via": set()}
            entries[canonicalize_name(match.group(1))] = current
            in_via = False
            continue
        stripped = line.strip()
        if current is None:
            continue
        if stripped.startswith("--hash=sha256:"):
            current["hashes"] += 1
        elif stripped.startswith("# via"):
            rest = stripped[len("# via") :].strip()
            in_via = True
            if rest:
                current["via"].add(rest)
        elif in_via and stripped.startswith("#   "):
            current["via"].add(stripped[1:].strip())
        else:
            in_via = False
    return entries


@pytest.mark.parametrize("source", sorted(LOCKS))
def test_every_input_pin_is_locked_at_its_version(source):
    lock = lock_entries(LOCKS[source])
    for package, (version, named_in) in input_pins(source).items():
        assert package in lock, f"{package} ({named_in}) is not in {LOCKS[source]}: run `make lock`"
        assert lock[package]["version"] == version, (
            f"{package}: {named_in} pins {version}, {LOCKS[source]} has {lock[package]['version']}: run `make lock`"
        )


@pytest.mark.parametrize("source", sorted(LOCKS))
def test_every_package_an_input_asked_for_is_still_in_it(source):
    inputs = input_pins(source)
    for package, entry in lock_entries(LOCKS[source]).items():
        asked_by = {via[3:].strip() for via in entry["via"] if via.startswith("-r ")}
        brought_by_packages = {via for via in entry["via"] if not via.startswith(("-r ", "-c "))}
        if asked_by and not brought_by_packages:
            # Only inputs brought it (a constraint brings nothing): one of them still must.
            assert package in inputs, (
                f"{package} is locked in {LOCKS[source]} for {asked_by} but named by no input any more: run `make lock`"
            )


@pytest.mark.parametrize("lock", sorted(LOCKS.values()))
def test_every_pin_has_hashes_and_no_machine_paths(lock):
    text = (ROOT / lock).read_text()
    entries = lock_entries(lock)
    assert entries, f"{lock} pins nothing"
    for package, entry in entries.items():
        assert entry["hashes"] >= 1, f"{lock}: {package} has no --hash: `pip install --require-hashes` would refuse it"
    # The index this machine uses is its own business: a lock names no local path or index.
    assert "--find-links" not in text and "--extra-index-url" not in text and "--index-url" not in text
    assert "file://" not in text and "/opt/" not in text


def test_run_and_dev_install_the_versions_production_does():
    runtime = lock_entries("requirements.txt")
    for other in ("requirements-run.txt", "requirements-dev.txt"):
        entries = lock_entries(other)
        for package, entry in runtime.items():
            assert package in entries, f"{other} lacks {package}, which production installs"
            assert entries[package]["version"] == entry["version"], (
                f"{package}: {other} has {entries[package]['version']}, production {entry['version']}"
            )
    run = lock_entries("requirements-run.txt")
    dev = lock_entries("requirements-dev.txt")
    for package, entry in run.items():
        assert dev.get(package, {}).get("version") == entry["version"], f"{package}: dev and run locks differ"


@pytest.mark.parametrize("lock", sorted(LOCKS.values()))
def test_locks_are_compiled_for_the_projects_python(lock):
    version = (ROOT / ".python-version").read_text().strip()
    header = (ROOT / lock).read_text()[:400]
    assert f"autogenerated by pip-compile with Python {version}\n" in header, (
        f"{lock} was not compiled with Python {version} (.python-version): run `make lock` there"
    )
    assert "make lock" in header
