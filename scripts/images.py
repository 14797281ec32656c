"""Build the console's instance images (images/*) into the console's podman store, cached.

    python scripts/images.py build [NAME ...]    base, minimal, minimal-alt, python, pytorch (default: every
                                                 one not marked on_request, in that order)
    python scripts/images.py list                what is built, from the manifests

``images/<name>/image.toml``'s ``[build]`` table, when there is one: ``parent``, the image to build
first (and on; else the one the Containerfile's FROM names); ``on_request = true``, skipped by a plain
``build`` (``make images``): name it to build it; ``[build.contents]``, name = a Python command run in
the built image (``/opt/venv/bin/python -c``) whose printed line joins the manifest's ``contents``.

``base``: Debian bookworm minbase from this machine's Debian mirror (mmdebstrap) with the packages
of ``images/base/packages``, imported with ``podman import``. The others: ``images/<name>/Containerfile``
built with ``images/`` as the context (so ``COPY contract/console-start`` works), on top of the
image they name in FROM (built first).

An image is rebuilt only when its inputs change: their SHA-256 (the Containerfile or package list,
the files of ``images/contract``, the mirror, the parent image's id) is the image's label
``org.gpu-console.inputs``; the same hash means nothing to do. pip inside a build reaches PyPI
through the machine's TLS-inspecting proxy: its CA bundle goes in as a build secret, never a layer.

Each build writes ``var/images/<name>.json`` (name, reference, podman image id, size, contents read
from the built image: Debian release, Python and JupyterLab versions), which the registry publisher
reads to push the image and record its digest.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from providers.local.runtime.podman import Podman, PodmanError  # noqa: E402

IMAGES_DIR = ROOT / "images"
MANIFESTS = ROOT / "var" / "images"
REFS = {
    "base": "localhost/console/base:bookworm",
    "minimal": "localhost/console/minimal:latest",
    "minimal-alt": "localhost/console/minimal-alt:latest",
    "python": "localhost/console/python:latest",
    "pytorch": "localhost/console/pytorch:latest",
}
ORDER = ("base", "minimal", "minimal-alt", "python", "pytorch")
INPUTS_LABEL = "org.gpu-console.inputs"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
SUITE = "bookworm"


def debian_mirrors() -> list[str]:
    """This machine's Debian sources as one-line ``deb`` entries for the suite (deb822 or classic)."""
    lines: list[str] = []
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in sources:
        try:
            text = path.read_text()
        except OSError:
            continue
        if path.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                fields = dict(re.findall(r"^(\w[\w-]*):\s*(.+)$", stanza, flags=re.M))
                if "deb" not in fields.get("Types", "").split():
                    continue
                for uri in fields.get("URIs", "").split():
                    for suite in fields.get("Suites", "").split():
                        if suite.startswith(SUITE):
                            lines.append(f"deb {uri} {suite} {fields.get('Components', 'main')}")
        else:
            for line in text.splitlines():
                words = line.split()
                if len(words) >= 3 and words[0] == "deb" and words[2].startswith(SUITE):
                    lines.append(" ".join(words))
    return lines or [f"deb http://deb.debian.org/debian {SUITE} main"]


def _hash(*parts: bytes | str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() if isinstance(part, str) else part)
        digest.update(b"\0")
    return digest.hexdigest()


def _contract_files() -> list[bytes]:
    return [p.read_bytes() for p in sorted((IMAGES_DIR / "contract").rglob("*")) if p.is_file()]


def build_config(name: str) -> dict:
    """The ``[build]`` table of ``images/<name>/image.toml`` (empty without one)."""
    path = IMAGES_DIR / name / "image.toml"
    try:
        table = tomllib.loads(path.read_text()).get("build") or {}
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise SystemExit(f"{path}: {exc}") from exc
    return table if isinstance(table, dict) else {}


def default_names() -> list[str]:
    """What a plain ``build`` (``make images``) builds: every image not marked ``on_request``."""
    return [name for name in ORDER if not build_config(name).get("on_request")]


def parent_of(name: str) -> str | None:
    if name == "base":
        return None
    parent = build_config(name).get("parent")
    if parent:
        if parent not in REFS:
            raise SystemExit(f"images/{name}/image.toml: unknown parent {parent!r} (known: {', '.join(ORDER)})")
        return str(parent)
    text = (IMAGES_DIR / name / "Containerfile").read_text()
    match = re.search(r"^FROM\s+(\S+)", text, flags=re.M)
    ref = match.group(1) if match else ""
    return next((n for n, r in REFS.items() if r == ref), None)


def inputs_hash(podman: Podman, name: str) -> str:
    if name == "base":
        packages = (IMAGES_DIR / "base" / "packages").read_text()
        return _hash("base", SUITE, packages, *debian_mirrors())
    parent = parent_of(name)
    parent_id = (podman.inspect("image", REFS[parent]) or {}).get("Id", "") if parent else ""
    folder = IMAGES_DIR / name
    files = [p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()]
    return _hash(name, parent_id, *files, *_contract_files())


def built_hash(podman: Podman, ref: str) -> str | None:
    info = podman.inspect("image", ref)
    if not info:
        return None
    return ((info.get("Config") or {}).get("Labels") or {}).get(INPUTS_LABEL) or (info.get("Labels") or {}).get(
        INPUTS_LABEL
    )


def build_base(podman: Podman, inputs: str) -> None:
    packages = [
        line.strip()
        for line in (IMAGES_DIR / "base" / "packages").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    with tempfile.TemporaryDirectory(prefix="console-base-", dir=podman.conf_dir / "tmp") as tmp:
        tarball = Path(tmp) / "base.tar"
        mirrors = "\n".join(debian_mirrors())
        command = [
            "mmdebstrap",
            "--quiet",
            "--variant=minbase",
            "--include=" + ",".join(packages),
            # Smaller and reproducible: no docs, man pages or apt lists in the image.
            "--dpkgopt=path-exclude=/usr/share/man/*",
            "--dpkgopt=path-exclude=/usr/share/doc/*",
            "--dpkgopt=path-exclude=/usr/share/locale/*",
            "--customize-hook=rm -rf $1/var/lib/apt/lists/* $1/etc/ssh/ssh_host_*",
            SUITE,
            str(tarball),
            "-",
        ]
        subprocess.run(command, input=mirrors, text=True, check=True)  # noqa: S603
        podman.run(
            "import",
            "--change",
            'CMD ["/bin/bash"]',
            "--change",
            f"LABEL {INPUTS_LABEL}={inputs}",
            str(tarball),
            REFS["base"],
            timeout=600,
        )


def build_containerfile(podman: Podman, name: str, inputs: str) -> None:
    args = [
        "build",
        "--pull=never",
        "--layers",
        "-f",
        str(IMAGES_DIR / name / "Containerfile"),
        "--label",
        f"{INPUTS_LABEL}={inputs}",
        "-t",
        REFS[name],
    ]
    if CA_BUNDLE.is_file():
        args += ["--secret", f"id=ca,src={CA_BUNDLE}"]
    args.append(str(IMAGES_DIR))
    result = podman.run(*args, check=False, timeout=1800)
    if result.returncode != 0:
        sys.stderr.write(result.stdout[-4000:] + result.stderr[-4000:])
        raise PodmanError(f"podman build of {name} failed")


def contents(podman: Podman, ref: str) -> dict:
    """What the image holds, read from it: its Debian release, Python and JupyterLab versions."""
    script = (
        "import json, platform, re\n"
        "os_release = dict(re.findall(r'^(\\w+)=\"?([^\"\\n]*)\"?$', open('/etc/os-release').read(), re.M))\n"
        "try:\n"
        "    from importlib.metadata import version\n"
        "    lab = version('jupyterlab')\n"
        "except Exception:\n"
        "    lab = None\n"
        "print(json.dumps({'os': os_release.get('PRETTY_NAME', ''), 'python': platform.python_version(),"
        " 'jupyterlab': lab}))\n"
    )
    python = "/opt/venv/bin/python" if ref != REFS["base"] else "python3"
    result = podman.run("run", "--rm", "--network=none", "--entrypoint", python, ref, "-c", script, check=False)
    try:
        found = json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        found = {}
    name = next((n for n, r in REFS.items() if r == ref), "")
    for key, command in (build_config(name).get("contents") or {}).items() if name else ():
        found[key] = _read_in(podman, ref, python, str(command))
    return found


def _read_in(podman: Podman, ref: str, python: str, command: str) -> str | None:
    """The last line a Python command prints in the image (None when it fails: not there)."""
    result = podman.run("run", "--rm", "--network=none", "--entrypoint", python, ref, "-c", command, check=False)
    lines = result.stdout.strip().splitlines()
    return lines[-1].strip() if result.returncode == 0 and lines else None


def manifest_write(podman: Podman, name: str, inputs: str, build_seconds: float | None) -> dict:
    info = podman.inspect("image", REFS[name]) or {}
    manifest = {
        "name": name,
        "ref": REFS[name],
        "image_id": info.get("Id", ""),
        "size_bytes": int(info.get("Size") or 0),
        "inputs": inputs,
        "contract": name != "base",
        "contents": contents(podman, REFS[name]),
        "built_at": info.get("Created", ""),
        "build_seconds": build_seconds,
    }
    MANIFESTS.mkdir(parents=True, exist_ok=True)
    tmp = MANIFESTS / f".{name}.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    tmp.replace(MANIFESTS / f"{name}.json")
    return manifest


def build(names: list[str], *, podman: Podman | None = None, quiet: bool = False) -> dict[str, dict]:
    """Build ``names`` (and the images they are built on) unless cached; returns their manifests."""
    podman = podman or Podman()
    missing = podman.missing()
    if missing:
        raise PodmanError(missing)
    (podman.conf_dir / "tmp").mkdir(parents=True, exist_ok=True)
    wanted: set[str] = set()
    for name in names:
        if name not in REFS:
            raise SystemExit(f"unknown image {name!r} (known: {', '.join(ORDER)})")
        while name:
            wanted.add(name)
            name = parent_of(name)
    manifests = {}
    for name in [n for n in ORDER if n in wanted]:
        inputs = inputs_hash(podman, name)
        manifest_path = MANIFESTS / f"{name}.json"
        if built_hash(podman, REFS[name]) == inputs:
            if not quiet:
                print(f"{name}: cached ({REFS[name]})")
            try:
                manifest = json.loads(manifest_path.read_text())
            except (OSError, json.JSONDecodeError):
                manifest = {}
            image_id = (podman.inspect("image", REFS[name]) or {}).get("Id")
            if manifest.get("inputs") != inputs or manifest.get("image_id") != image_id:
                manifest = manifest_write(podman, name, inputs, None)
            manifests[name] = manifest
            continue
        if not quiet:
            print(f"{name}: building {REFS[name]}")
        started = time.monotonic()
        if name == "base":
            build_base(podman, inputs)
        else:
            build_containerfile(podman, name, inputs)
        seconds = round(time.monotonic() - started, 1)
        manifests[name] = manifest_write(podman, name, inputs, seconds)
        if not quiet:
            print(f"{name}: built in {seconds} s, {manifests[name]['size_bytes'] / 1e6:.0f} MB")
    return manifests


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    build_parser = sub.add_parser("build")
    build_parser.add_argument("names", nargs="*")
    sub.add_parser("list")
    args = parser.parse_args(argv)
    if args.command == "list":
        for path in sorted(MANIFESTS.glob("*.json")):
            print(path.read_text().strip())
        return 0
    try:
        build(args.names or default_names())
    except (PodmanError, subprocess.CalledProcessError) as exc:
        print(f"images: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
