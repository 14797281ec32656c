"""The recipe of a saved image: a Containerfile that rebuilds it, read off the layer the save pushed.

A save is its base image plus one layer (``image_save``). What that layer changed is written back as
build steps, so an owner can see what drifted, edit it and build a new image through the console's
builder (``image_build``):

- Debian packages added or upgraded: the layer's ``/var/lib/dpkg/status`` against the base's (every
  package ``install ok installed`` whose version differs) → one ``apt-get install pkg=version …``;
  packages the layer removed → ``apt-get purge``. Without the base's status (the base is not on this
  host), the packages whose ``/var/lib/dpkg/info/<pkg>.list`` the layer rewrote stand in.
- Python packages added or upgraded in a virtual environment (``<venv>/lib/pythonX.Y/site-packages``):
  the ``*.dist-info`` folders in the layer → ``<venv>/bin/pip install name==version …``; a dist-info
  whited out with no new one of the same name → ``pip uninstall``. A package installed from a local
  file or a URL (``direct_url.json``) cannot be fetched again by name: its files are copied instead.
- Files deleted (overlay whiteouts) → ``RUN rm -rf``.
- Every other file the layer holds (not a package's, not a cache, nothing the save leaves out) →
  ``COPY --from=<the saved image>``: the console's registry keeps the saved image, so it is the build
  context, with no second copy of the files to store. Ownership other than root's is kept with
  ``--chown``; symbolic links become ``ln -sfn``.

What is left out, and why, is said in comments at the top of the recipe. No Django here: pure
functions of a layer tar, tested on small tars (``providers/local/tests/test_image_recipe.py``).
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import BinaryIO

from providers.local.runtime.image_save import DROPPED_GLOBS, DROPPED_PREFIXES

DPKG_STATUS = "var/lib/dpkg/status"
DPKG_INFO = "var/lib/dpkg/info/"
SITE_PACKAGES = re.compile(r"^(?P<root>.+?)/lib/python3[.\d]*/(?:site|dist)-packages/(?P<rest>.+)$")
DIST_INFO = re.compile(r"^(?P<name>[^/]+)-(?P<version>[^-/]+)\.dist-info$")
# Read off the layer by the package steps above, or rebuilt by any build: never copied.
NOT_COPIED_PREFIXES = (
    "var/lib/dpkg/",
    "var/lib/apt/",
    "var/cache/",
    "var/log/",
    "root/.cache/",
    "etc/ld.so.cache",
)
GLOB_CHARS = re.compile(r"[*?\[\]\\]")
MAX_COPIED_FILES = 5000  # more than this and the recipe would be a file list, not a recipe
# The COPY lines' budget: the recipe must stay under what the builder accepts (1 MiB by default).
MAX_COPY_BYTES = 768 << 10
MAX_STATUS_BYTES = 32 << 20  # a dpkg status of 32 MiB is tens of thousands of packages


def _norm(name: str) -> str:
    return posixpath.normpath("/" + name.removeprefix("./")).lstrip("/")


def _left_out_by_save(path: str) -> bool:
    return path.startswith(DROPPED_PREFIXES) or any(path.startswith(g) for g in DROPPED_GLOBS)


def dpkg_status_parse(text: str) -> dict[str, str]:
    """``{package: version}`` of the packages a dpkg status file says are installed (``install ok
    installed``); a package of a foreign architecture is named ``name:arch``."""
    installed: dict[str, str] = {}
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line[:1] in (" ", "\t") or ":" not in line:
                continue
            key, _colon, value = line.partition(":")
            fields[key.strip().lower()] = value.strip()
        name, version = fields.get("package"), fields.get("version")
        if not name or not version or fields.get("status") != "install ok installed":
            continue
        arch = fields.get("architecture", "")
        if fields.get("multi-arch") == "same" and arch not in ("", "all", "amd64"):
            name = f"{name}:{arch}"
        installed[name] = version
    return installed


@dataclass
class DistInfo:
    """A Python package's ``*.dist-info`` folder found in the layer."""

    root: str  # the environment: ``opt/venv``, ``usr/local``
    name: str
    version: str
    files: set[str] = field(default_factory=set)  # from its RECORD, as paths of the image
    direct: bool = False  # installed from a file or URL (direct_url.json), not by name from an index


@dataclass
class LayerContents:
    """What one layer holds, as the recipe needs it."""

    files: dict[str, tarfile.TarInfo] = field(default_factory=dict)  # regular files and hard links
    links: dict[str, str] = field(default_factory=dict)  # symbolic links: path → target
    dirs: dict[str, tarfile.TarInfo] = field(default_factory=dict)
    whiteouts: set[str] = field(default_factory=set)  # paths the layer deleted
    opaque: set[str] = field(default_factory=set)  # folders whose earlier contents the layer hid
    dpkg_status: str | None = None
    dpkg_lists: dict[str, set[str]] = field(default_factory=dict)  # package → the files it installed
    dist_infos: dict[str, DistInfo] = field(default_factory=dict)  # dist-info folder → what it says
    removed_dist_infos: dict[str, tuple[str, str]] = field(default_factory=dict)  # folder → (root, name)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def layer_read(src: BinaryIO) -> LayerContents:
    """Read an uncompressed (or gzip) layer tar once, keeping the headers and the few small files the
    recipe needs: dpkg's status and file lists, dist-info ``METADATA``/``RECORD``/``direct_url.json``."""
    layer = LayerContents()
    records: dict[str, list[str]] = {}
    with tarfile.open(fileobj=src, mode="r|*") as reader:
        for member in reader:
            path = _norm(member.name)
            if not path or path == ".":
                continue
            folder, base = posixpath.split(path)
            if base == ".wh..wh..opq":
                layer.opaque.add(folder)
                continue
            if base.startswith(".wh."):
                gone = posixpath.join(folder, base[4:])
                layer.whiteouts.add(gone)
                site = SITE_PACKAGES.match(gone)
                info = DIST_INFO.match(posixpath.basename(gone))
                if site and info and "/" not in site["rest"]:
                    layer.removed_dist_infos[gone] = (site["root"], info["name"])
                continue
            if member.isdir():
                layer.dirs[path] = member
                continue
            if member.issym():
                layer.links[path] = member.linkname
                continue
            if not (member.isreg() or member.islnk()):
                continue  # devices and fifos: nothing a recipe should make
            layer.files[path] = member
            data = reader.extractfile(member) if member.isreg() else None
            if data is None:
                continue
            if path == DPKG_STATUS and member.size <= MAX_STATUS_BYTES:
                layer.dpkg_status = data.read().decode("utf-8", "replace")
            elif path.startswith(DPKG_INFO) and base.endswith(".list") and member.size <= MAX_STATUS_BYTES:
                package = base.removesuffix(".list").removesuffix(":amd64")
                layer.dpkg_lists[package] = {
                    _norm(line) for line in data.read().decode("utf-8", "replace").splitlines() if line.strip()
                }
            site = SITE_PACKAGES.match(path)
            if site is None:
                continue
            top, _slash, leaf = site["rest"].partition("/")
            info = DIST_INFO.match(top)
            if info is None or "/" in leaf:
                continue
            key = folder
            entry = layer.dist_infos.setdefault(
                key, DistInfo(root=site["root"], name=info["name"], version=info["version"])
            )
            if leaf == "RECORD" and member.size <= MAX_STATUS_BYTES:
                records[key] = data.read().decode("utf-8", "replace").splitlines()
            elif leaf == "METADATA" and member.size <= MAX_STATUS_BYTES:
                headers = data.read(64 << 10).decode("utf-8", "replace").split("\n\n", 1)[0]
                found = dict(re.findall(r"^(Name|Version):\s*(.+?)\s*$", headers, re.M))
                entry.name, entry.version = found.get("Name", entry.name), found.get("Version", entry.version)
            elif leaf == "direct_url.json":
                try:
                    url = json.loads(data.read(64 << 10) or b"{}")
                except ValueError:
                    url = {}
                # ``pip install name==v`` from an index leaves no direct_url.json; a wheel file, a folder,
                # a VCS URL do: those cannot be installed again by name.
                entry.direct = bool(url.get("url"))
    for key, lines in records.items():
        site_dir = posixpath.dirname(key)
        for line in lines:
            relative = line.rsplit(",", 2)[0] if line.count(",") >= 2 else line
            if relative:
                layer.dist_infos[key].files.add(_norm(posixpath.join(site_dir, relative)))
    return layer


@dataclass
class Recipe:
    """A derived recipe: its text, and what it left out (also in the text's comments)."""

    text: str
    apt: list[str]
    pip: dict[str, list[str]]  # environment → ``name==version``
    copied: int
    left_out: list[str]


def _q(path: str) -> str:
    return shlex.quote("/" + path)


def _apt_steps(
    layer: LayerContents, base_status: str | None, notes: list[str]
) -> tuple[list[str], list[str], set[str]]:
    """``(install, purge, files)``: ``pkg=version`` to install, packages to purge, and the files the
    installed packages own (not copied)."""
    if layer.dpkg_status is None:
        return [], [], set()
    now = dpkg_status_parse(layer.dpkg_status)
    if base_status is not None:
        before = dpkg_status_parse(base_status)
        added = sorted(p for p, v in now.items() if before.get(p) != v)
        purged = sorted(p for p in before if p not in now)
    else:
        # The base's status is not at hand: the packages whose file list the layer rewrote were unpacked.
        added = sorted(p for p in now if p in layer.dpkg_lists or p.split(":")[0] in layer.dpkg_lists)
        purged = []
        notes.append("Debian packages: read from the file lists the layer changed (the base's status was not at hand).")
    owned: set[str] = set()
    for package in added:
        owned |= layer.dpkg_lists.get(package, set()) | layer.dpkg_lists.get(package.split(":")[0], set())
    return [f"{p}={now[p]}" for p in added], purged, owned


def _pip_steps(layer: LayerContents, notes: list[str]) -> tuple[dict[str, list[str]], dict[str, list[str]], set[str]]:
    """``(install, uninstall, files)`` per environment, and the files the installed packages own."""
    install: dict[str, list[str]] = {}
    owned: set[str] = set()
    installed_names: dict[str, set[str]] = {}
    for key, info in sorted(layer.dist_infos.items()):
        installed_names.setdefault(info.root, set()).add(_canonical(info.name))
        if info.direct:
            notes.append(
                f"Python package {info.name} {info.version} was installed from a file or URL, not by name: "
                "its files are copied."
            )
            continue
        install.setdefault(info.root, []).append(f"{info.name}=={info.version}")
        owned |= info.files
        owned.add(key)
    uninstall: dict[str, list[str]] = {}
    for _key, (root, name) in sorted(layer.removed_dist_infos.items()):
        if _canonical(name) not in installed_names.get(root, set()):
            uninstall.setdefault(root, []).append(name)
    return install, uninstall, owned


def _under(path: str, folders: set[str]) -> bool:
    return any(path == f or path.startswith(f + "/") for f in folders)


def _pip_command(root: str) -> str:
    if root in ("usr", "usr/local"):
        return "python3 -m pip install --no-cache-dir --break-system-packages"
    return f"/{root}/bin/pip install --no-cache-dir --disable-pip-version-check"


def _pip_uninstall(root: str) -> str:
    if root in ("usr", "usr/local"):
        return "python3 -m pip uninstall -y --break-system-packages"
    return f"/{root}/bin/pip uninstall -y"


def _wrap(command: str, words: list[str]) -> str:
    return "RUN " + " \\\n    ".join([command, *(" ".join(words[i : i + 4]) for i in range(0, len(words), 4))])


def recipe_derive(
    layer: LayerContents,
    *,
    base_ref: str,
    saved_ref: str,
    base_status: str | None = None,
    max_copied: int = MAX_COPIED_FILES,
    header: Mapping[str, str] | None = None,
) -> Recipe:
    """The Containerfile that rebuilds ``base_ref`` + ``layer`` (see the module's docstring); ``saved_ref``
    (``repository@digest`` of the saved image) is where ``COPY --from`` takes the changed files."""
    notes: list[str] = []
    left_out: list[str] = []
    apt_install, apt_purge, apt_owned = _apt_steps(layer, base_status, notes)
    pip_install, pip_uninstall, pip_owned = _pip_steps(layer, notes)
    owned = apt_owned | pip_owned
    pip_folders = {k for k, info in layer.dist_infos.items() if not info.direct}

    copies: dict[tuple[str, int, int], list[str]] = {}
    links: list[tuple[str, str]] = []
    skipped = {"package": 0, "cache": 0, "save": 0, "glob": 0}
    for path in sorted(layer.files):
        if _left_out_by_save(path):
            skipped["save"] += 1
        elif path in owned or _under(path, pip_folders):
            skipped["package"] += 1
        elif path.startswith(NOT_COPIED_PREFIXES) or "/__pycache__/" in f"/{path}" or path.endswith(".pyc"):
            skipped["cache"] += 1
        elif GLOB_CHARS.search(path) or "\n" in path:
            skipped["glob"] += 1
            left_out.append(f"/{path} (a name COPY would read as a pattern)")
        else:
            member = layer.files[path]
            copies.setdefault((posixpath.dirname(path), member.uid, member.gid), []).append(path)
    for path, target in sorted(layer.links.items()):
        if _left_out_by_save(path) or path in owned or path.startswith(NOT_COPIED_PREFIXES):
            continue
        links.append((path, target))
    copied = sum(len(v) for v in copies.values())
    copy_bytes = sum(len(saved_ref) + 30 + sum(len(p) + 4 for p in paths) for paths in copies.values())
    if copied > max_copied:
        left_out.append(f"{copied} changed files: more than {max_copied}, so none are copied (copy what you need)")
        copies, copied = {}, 0
    elif copy_bytes > MAX_COPY_BYTES:
        left_out.append(
            f"{copied} changed files: their COPY lines would take {copy_bytes >> 10} KiB, more than "
            f"{MAX_COPY_BYTES >> 10} KiB, so none are copied (copy what you need)"
        )
        copies, copied = {}, 0

    removed = sorted(
        p
        for p in layer.whiteouts
        if not _left_out_by_save(p)
        and p not in layer.removed_dist_infos
        and not _under(p, set(layer.removed_dist_infos))
        and not p.startswith(NOT_COPIED_PREFIXES)
    )
    # An opaque folder hid what the base had in it (overlay marks a folder made anew so, too): cleared
    # before anything is installed, unless a package above owns it (installing it makes it again).
    cleared = sorted(
        p
        for p in layer.opaque
        if not _left_out_by_save(p)
        and p not in owned
        and not _under(p, pip_folders)
        and not p.startswith(NOT_COPIED_PREFIXES)
        and not _under(p, set(removed))
    )

    lines = ["# syntax: a Containerfile; the console's builder builds it (Images → Build)."]
    for key, value in (header or {}).items():
        lines.append(f"# {key}: {value}")
    lines += [
        "# It rebuilds the saved image from its base: packages by name and version where the layer",
        "# says which, the other changed files copied from the saved image itself (deleting that",
        "# image breaks the COPY lines). Never in it: the console's paths (/run, /tmp), /home/user",
        "# (the instance's disk, not the image), sshd host keys, caches and package databases.",
    ]
    for note in notes:
        lines.append(f"# Note: {note}")
    counts = [
        f"{n} {what}"
        for what, n in (
            ("owned by the packages above", skipped["package"]),
            ("caches or package databases", skipped["cache"]),
            ("of the console's paths", skipped["save"]),
        )
        if n
    ]
    if counts:
        lines.append("# Files not copied: " + ", ".join(counts) + ".")
    for item in left_out[:50]:
        lines.append(f"# Left out: {item}")
    if len(left_out) > 50:
        lines.append(f"# Left out: {len(left_out) - 50} more")
    lines += ["", f"FROM {base_ref}", ""]
    # The layer's deletions apply to the base: first, so nothing installed below is deleted again.
    if removed or cleared:
        words = [_q(p) for p in removed]
        commands = []
        if words:
            commands.append(_wrap("rm -rf --", words).removeprefix("RUN "))
        for folder in cleared:
            commands.append(
                f"[ ! -d {_q(folder)} ] || find {_q(folder)} -mindepth 1 -maxdepth 1 -exec rm -rf -- {{}} +"
            )
        lines += ["RUN " + " \\\n && ".join(commands), ""]
    if apt_install or apt_purge:
        steps = ["apt-get update"]
        if apt_install:
            steps.append(
                "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends " + " ".join(apt_install)
            )
        if apt_purge:
            steps.append("apt-get purge -y " + " ".join(apt_purge))
        steps.append("rm -rf /var/lib/apt/lists/*")
        lines += ["RUN " + " \\\n && ".join(steps), ""]
    for root, names in sorted(pip_uninstall.items()):
        lines += [_wrap(_pip_uninstall(root), names), ""]
    for root, names in sorted(pip_install.items()):
        lines += [_wrap(_pip_command(root), names), ""]
    for (folder, uid, gid), paths in sorted(copies.items()):
        chown = f" --chown={uid}:{gid}" if (uid, gid) != (0, 0) else ""
        sources = [f"/{p}" for p in paths]
        target = f"/{folder}/" if folder else "/"
        lines.append(f"COPY --from={saved_ref}{chown} {json.dumps([*sources, target])}")
    if copies:
        lines.append("")
    if links:
        commands = [f"ln -sfn {shlex.quote(target)} {_q(path)}" for path, target in links]
        lines += ["RUN " + " \\\n && ".join(commands), ""]
    return Recipe(
        text="\n".join(lines).rstrip() + "\n",
        apt=apt_install,
        pip=pip_install,
        copied=copied,
        left_out=left_out,
    )
