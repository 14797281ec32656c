"""Build the console's instance images (images/*) into the console's podman store, cached.

    python scripts/images.py build [NAME ...]    base, minimal, minimal-alt, python, pytorch, llama-server, mlflow
                                                 (default: every one not marked on_request, in that order)
    python scripts/images.py list                what is built, from the manifests

``images/<name>/image.toml``'s ``[build]`` table, when there is one: ``parent``, the image to build
first (and on; else the one the Containerfile's FROM names); ``on_request = true``, skipped by a plain
``build`` (``make images``): name it to build it; ``[build.contents]``, name = a Python command run in
the built image (``/opt/venv/bin/python -c``, or ``python``'s value) whose printed line joins the manifest's
``contents``; ``[build.contexts]``, name = a command (argv, run from the repository root) that prints a
folder made outside the clone (a compiled server, a model file): passed as ``--build-context name=folder``
for the Containerfile's ``COPY --from=name``, its files part of the image's inputs.

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
    "llama-server": "localhost/console/llama-server:latest",
    "mlflow": "localhost/console/mlflow:latest",
}
ORDER = ("base", "minimal", "minimal-alt", "python", "pytorch", "llama-server", "mlflow")
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


def build_contexts(name: str) -> dict[str, Path]:
    """The extra build contexts of ``name`` (``[build.contexts]``): each command run, its folder returned.
    A command that fails fails the build of this image (its output says why)."""
    contexts = {}
    for context, argv in (build_config(name).get("contexts") or {}).items():
        command = [str(part) for part in (argv if isinstance(argv, list) else [argv])]
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)  # noqa: S603
        folder = Path(result.stdout.strip().splitlines()[-1]) if result.stdout.strip() else None
        if result.returncode != 0 or folder is None or not folder.is_dir():
            sys.stderr.write(result.stderr[-4000:])
            raise PodmanError(f"images/{name}: the build context {context!r} ({' '.join(command)}) could not be made")
        contexts[str(context)] = folder
    return contexts


def _folder_files(folder: Path) -> list[bytes]:
    """A context folder's files as hash inputs: name, size and content (hashed in 1 MiB reads)."""
    parts = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        parts.append(f"{path.relative_to(folder)}:{path.stat().st_size}:{digest.hexdigest()}".encode())
    return parts


def inputs_hash(podman: Podman, name: str, contexts: dict[str, Path] | None = None) -> str:
    if name == "base":
        packages = (IMAGES_DIR / "base" / "packages").read_text()
        return _hash("base", SUITE, packages, *debian_mirrors())
    parent = parent_of(name)
    parent_id = (podman.inspect("image", REFS[parent]) or {}).get("Id", "") if parent else ""
    folder = IMAGES_DIR / name
    files = [p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()]
    extra = [part for context in sorted(contexts or {}) for part in _folder_files((contexts or {})[context])]
    return _hash(name, parent_id, *files, *_contract_files(), *extra)


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


def build_containerfile(podman: Podman, name: str, inputs: str, contexts: dict[str, Path] | None = None) -> None:
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
    for context, folder in sorted((contexts or {}).items()):
        args += ["--build-context", f"{context}={folder}"]
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
    name = next((n for n, r in REFS.items() if r == ref), "")
    python = "/opt/venv/bin/python" if ref != REFS["base"] else "python3"
    python = str(build_config(name).get("python") or python) if name else python
    result = podman.run("run", "--rm", "--network=none", "--entrypoint", python, ref, "-c", script, check=False)
    try:
        found = json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        found = {}
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
    """Build ``names`` (and the images they are built on) unless cached; returns their manifests.

    An image that fails does not stop the others (the MLflow image needs no llama-server): those built
    on it are skipped, and the first failure is raised at the end, after every other image is done."""
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
    manifests: dict[str, dict] = {}
    failures: list[Exception] = []
    for name in [n for n in ORDER if n in wanted]:
        parent = parent_of(name)
        if parent and parent not in manifests:
            continue  # its parent failed
        try:
            manifests[name] = _build_one(podman, name, quiet=quiet)
        except (PodmanError, subprocess.CalledProcessError) as exc:
            print(f"{name}: failed: {exc}", file=sys.stderr)
            failures.append(exc)
    if failures:
        raise failures[0]
    return manifests


def _build_one(podman: Podman, name: str, *, quiet: bool) -> dict:
    """One image, unless cached; its manifest."""
    contexts = build_contexts(name)
    inputs = inputs_hash(podman, name, contexts)
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
        return manifest
    if not quiet:
        print(f"{name}: building {REFS[name]}")
    started = time.monotonic()
    if name == "base":
        build_base(podman, inputs)
    else:
        build_containerfile(podman, name, inputs, contexts)
    seconds = round(time.monotonic() - started, 1)
    manifest = manifest_write(podman, name, inputs, seconds)
    if not quiet:
        print(f"{name}: built in {seconds} s, {manifest['size_bytes'] / 1e6:.0f} MB")
    return manifest


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
