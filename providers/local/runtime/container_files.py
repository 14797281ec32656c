"""What the container runtime keeps for an instance on this host, outside its container: its disk (an
ext4 file of ``disk_gb``, loop-mounted at ``home/`` while it runs), the contract's read-only secrets
folder, and the sshd's host key, made once so the SSH gateway's pin holds across starts. Each owned by
the tenant's uids, as the user namespace maps them (``container_spec.CONTAINER_UID``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from providers.local.runtime.base import LocalRuntimeError
from providers.local.runtime.container_spec import CONTAINER_UID, ContainerPaths
from providers.local.runtime.podman import last_words
from providers.local.runtime.servers import APP, WEBUI


def home_mount(paths: ContainerPaths, meta: dict) -> None:
    """The instance's disk: an ext4 file of ``disk_gb`` loop-mounted at ``home/``, owned by the
    tenant's uid 1000. Made once; a larger ``disk_gb`` later grows it."""
    owner = int(meta["tenant"]["uid_base"]) + CONTAINER_UID
    size = int(meta["disk_gb"]) * 2**30
    if not paths.home_image.exists():
        with open(paths.home_image, "wb") as handle:
            handle.truncate(size)
        os.chmod(paths.home_image, 0o600)
        _run_checked(
            [
                "mkfs.ext4",
                "-q",
                "-F",
                "-m",
                "0",
                "-E",
                f"lazy_itable_init=1,lazy_journal_init=1,root_owner={owner}:{owner}",
                str(paths.home_image),
            ],
            "the instance's disk could not be made",
        )
    paths.home.mkdir(exist_ok=True)
    if not os.path.ismount(paths.home):
        _run_checked(
            ["mount", "-o", "loop,nodev,nosuid", str(paths.home_image), str(paths.home)],
            "the instance's disk could not be mounted",
        )
    lost = paths.home / "lost+found"
    if lost.is_dir():
        with contextlib.suppress(OSError):
            lost.rmdir()
    info = os.stat(paths.home)
    if (info.st_uid, info.st_gid) != (owner, owner):
        os.chown(paths.home, owner, owner)
    os.chmod(paths.home, 0o700)


def home_unmount(paths: ContainerPaths) -> None:
    if not (paths.home.exists() and os.path.ismount(paths.home)):
        return
    if subprocess.run(["umount", str(paths.home)], capture_output=True, check=False).returncode != 0:  # noqa: S603,S607
        subprocess.run(["umount", "-l", str(paths.home)], capture_output=True, check=False)  # noqa: S603,S607


# The owner's secrets (``InstanceSpec.secrets``) in the same folder: one file per secret, by its name
# (capitals, so never one of the console's own lower-case files), and ``user.env``, the ``export`` lines
# of those the owner asked for as variables, which the image contract's start script and log-in
# shells read. Never the container's environment (``podman run -e``): a saved image keeps that.
USER_SECRET_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,63}$")
USER_ENV_FILE = "user.env"


def user_secret_files(secrets: Sequence[Mapping]) -> dict[str, str]:
    """The files of the owner's secrets (``{"name", "value", "env"}`` each): ``<NAME>`` with the value as
    it is, and ``user.env`` with an ``export NAME='value'`` line per secret asked for as a variable."""
    files, exports = {}, []
    for secret in secrets:
        name, value = str(secret["name"]), str(secret["value"])
        if not USER_SECRET_NAME.match(name):
            raise LocalRuntimeError(f"invalid secret name {name!r}")
        files[name] = value
        if secret.get("env"):
            exports.append(f"export {name}={shlex.quote(value)}\n")
    files[USER_ENV_FILE] = "# Written by the console: the secrets exported as variables.\n" + "".join(exports)
    return files


def _is_user_secret(name: str) -> bool:
    return name == USER_ENV_FILE or bool(USER_SECRET_NAME.match(name))


def secrets_folder_clear_user(folder: Path) -> None:
    """Remove the owner's secrets from the folder (a stopped machine keeps none on the host's disk: its
    next start brings them again)."""
    if not folder.is_dir():
        return
    for entry in os.listdir(folder):
        if _is_user_secret(entry):
            with contextlib.suppress(FileNotFoundError):
                (folder / entry).unlink()


def secrets_folder_write(
    folder: Path, files: Mapping[str, str], *, owner: int, keep_user_secrets: bool = False
) -> None:
    """The contract's read-only folder: exactly ``files`` (an app's script no longer run is removed, and
    an owner's secret no longer chosen, unless ``keep_user_secrets``: a repair without a spec keeps
    those it had), each replaced whole and readable by the tenant's uid 1000 only; the folder 0500."""
    folder.mkdir(exist_ok=True)
    stale = {f"{service}.sh" for service in (APP, WEBUI)} - set(files)
    if not keep_user_secrets:
        stale |= {name for name in os.listdir(folder) if _is_user_secret(name)} - set(files)
    os.chmod(folder, 0o700)
    if os.geteuid() == 0:  # rootful: root's while it changes; a rootless caller (a Slurm job) owns it already
        os.chown(folder, 0, 0)
    for name in stale:  # an app no longer run, a secret no longer chosen
        with contextlib.suppress(FileNotFoundError):
            (folder / name).unlink()
    for name, text in files.items():
        target = folder / name
        tmp = folder / f".{name}.tmp"
        tmp.write_text(text)
        os.chown(tmp, owner, owner)
        os.chmod(tmp, 0o400)
        os.replace(tmp, target)
    os.chown(folder, owner, owner)
    os.chmod(folder, 0o500)


def hostkey_ensure(key: str, paths: ContainerPaths, meta: dict) -> None:
    """The sshd's host key, made once per instance on the host and mounted read-only for the
    container's root only (not uid 1000): the same key after every start, so the SSH gateway's
    pin holds, and never part of the image (a bind mount is not saved by a commit)."""
    folder = paths.hostkeys
    private = folder / "ssh_host_ed25519_key"
    root = int(meta["tenant"]["uid_base"])
    if not private.exists():
        folder.mkdir(exist_ok=True)
        os.chmod(folder, 0o700)
        _run_checked(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"instance-{key}", "-f", str(private)],
            "the instance's SSH host key could not be made",
        )
    for path in (private, private.with_suffix(".pub")):
        os.chown(path, root, root)
    os.chmod(private, 0o400)
    os.chown(folder, root, root)
    os.chmod(folder, 0o500)


def _run_checked(argv: list[str], what: str) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
    if result.returncode != 0:
        raise LocalRuntimeError(f"{what}: {last_words(result.stderr) or result.returncode}")
