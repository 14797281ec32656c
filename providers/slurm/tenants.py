"""Tenants as Unix users of a Slurm cluster: each account's jobs run as its own user, never as root.

Two ways a tenant's user comes to exist on the nodes (the backend's ``TENANT_USERS`` option):

- ``"site"`` (the default): the site provisions them (LDAP/SSSD, or its own configuration
  management) with the uid the console allocated (``instances.tenancy``). The console only names
  the user; a submission for a user the console's host does not know, or knows under another uid,
  fails with a reason that says so, and so does a job on a node that does not know it (the job's
  first line checks its own uid).
- ``"create"``: the console creates them itself, on the host it runs on, which must be the host whose
  ``/etc/passwd`` the nodes read (the test cluster of ``scripts/slurm-cluster.sh``, where every node
  is a ``slurmd`` on this host). ``groupadd``/``useradd`` with the tenant's uid as uid and gid, the
  tenant's subordinate uid and gid range (rootless podman's user namespace: the console's allocation,
  ``instances.tenancy``, and no other: useradd's own default range would overlap another tenant's,
  so it is never handed out), a home of mode 0700 under ``TENANT_HOME_ROOT`` with the tenant's own
  podman settings (``providers.slurm.pod.podman_config``: its image store, runc, cgroupfs), and its
  podman runtime folder on this host. Idempotent: a user that exists with the right uid is left as it is; one
  that exists with another uid is refused, never changed.

Both refuse uid 0 and any name the host resolves to uid 0: a job of the console never runs as root.

Authentication for slurmrestd as a tenant: a Slurm JWT names its user in the ``sun`` claim and is
signed (HS256) with the cluster's ``jwt_key``. A console that holds that key (``JWT_KEY_FILE``)
mints a short-lived token per tenant, as ``scontrol token username=…`` would (only root or
SlurmUser may run that for another user).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import pwd
import subprocess
import threading
import time
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from providers.base import PermanentBackendError, Tenant, TransientBackendError
from providers.local.runtime.base import LocalRuntimeError
from providers.slurm.pod import podman_config_write, runtime_dir_ensure

MODES = ("site", "create")
# Below this a uid belongs to the system (Debian's UID_MIN): never a tenant's.
MIN_TENANT_UID = 1000


def uid_of(user: str) -> int | None:
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None


def refuse_root_user(user: str, *, option: str) -> None:
    """A configuration error when ``user`` is root, or resolves to uid 0 on the console's host."""
    if not user:
        raise ImproperlyConfigured(f"The Slurm backend's {option} is empty: name the account it talks to Slurm as.")
    if user == "root" or uid_of(user) == 0:
        raise ImproperlyConfigured(
            f"The Slurm backend's {option} is {user!r}, which is uid 0: the console never submits or runs "
            "jobs as root. Name an unprivileged account (jobs themselves run as each tenant's own user)."
        )


def check_tenant(tenant: Tenant | None) -> Tenant:
    if tenant is None:
        raise PermanentBackendError(
            "This instance has no tenant: Slurm jobs run as the owner's own Unix user, never the console's."
        )
    if tenant.uid < MIN_TENANT_UID or tenant.name == "root":
        raise PermanentBackendError(f"Tenant {tenant.name!r} has uid {tenant.uid}: a job never runs as a system user.")
    return tenant


class TenantAccounts:
    """Makes sure a tenant's Unix user exists (``create``) or is there as the console named it (``site``)."""

    def __init__(self, *, mode: str, home_root: Path) -> None:
        if mode not in MODES:
            raise ImproperlyConfigured(f"TENANT_USERS must be one of {', '.join(MODES)}, not {mode!r}.")
        self.mode = mode
        self.home_root = home_root
        self._done: set[Tenant] = set()
        self._lock = threading.Lock()

    def home(self, tenant: Tenant) -> Path:
        return self.home_root / tenant.name

    def ensure(self, tenant: Tenant) -> None:
        tenant = check_tenant(tenant)
        with self._lock:
            if tenant in self._done:
                return
            found = uid_of(tenant.name)
            if found is not None and found != tenant.uid:
                raise PermanentBackendError(
                    f"The Unix user {tenant.name} exists with uid {found}, not the tenant's {tenant.uid}: "
                    "another account has its name. Fix the host's users; the console changes none."
                )
            if self.mode == "site":
                if found is None:
                    raise PermanentBackendError(
                        f"The Unix user {tenant.name} (uid {tenant.uid}) does not exist. With TENANT_USERS='site' "
                        "the site's directory (LDAP/SSSD) provides it on the console's host and every node."
                    )
            else:
                self._create(tenant, exists=found is not None)
            self._done.add(tenant)

    def hand_over(self, path: Path, tenant: Tenant, *, mode: int = 0o700) -> None:
        """``path`` becomes the tenant's own (its uid and gid, ``mode``)."""
        try:
            os.chown(path, tenant.uid, tenant.uid)
        except PermissionError as exc:
            raise PermanentBackendError(
                f"The console cannot hand {path} to the tenant's user {tenant.name}: it needs root (or CAP_CHOWN) "
                "on the instances' filesystem."
            ) from exc
        os.chmod(path, mode)

    @staticmethod
    def owns(path: Path, uid: int) -> bool:
        """Whether the tenant's user (``uid``) owns ``path``: the kernel's word on who wrote it."""
        try:
            return path.stat().st_uid == uid
        except OSError:
            return False

    def _create(self, tenant: Tenant, *, exists: bool) -> None:
        if os.geteuid() != 0:
            raise PermanentBackendError(
                "TENANT_USERS='create' needs the console to run as root on the cluster's host (it runs useradd); "
                "use 'site' where the site provisions the users."
            )
        home = self.home(tenant)
        self.home_root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.home_root, 0o711)  # noqa: S103 (tenants reach their own home, list nobody's)
        if not exists:
            _run(["groupadd", "--force", "--gid", str(tenant.uid), tenant.name])
            _run(
                [
                    "useradd",
                    # No subordinate range of useradd's own choosing: only the console's, below.
                    "-K",
                    "SUB_UID_COUNT=0",
                    "-K",
                    "SUB_GID_COUNT=0",
                    "--uid",
                    str(tenant.uid),
                    "--gid",
                    str(tenant.uid),
                    "--home-dir",
                    str(home),
                    "--no-create-home",
                    "--shell",
                    "/bin/bash",
                    "--comment",
                    "GPU console tenant",
                    tenant.name,
                ],
                ok_if="already exists",
            )
        elif _home_of(tenant.name) != str(home):
            # Made under another home root (the console's folder moved): the job's podman reads its
            # settings and image store from the home the user database names.
            _run(["usermod", "--home", str(home), tenant.name])
        last = tenant.uid_base + tenant.uid_count - 1
        for kind, table in (("subuids", "/etc/subuid"), ("subgids", "/etc/subgid")):
            line = f"{tenant.name}:{tenant.uid_base}:{tenant.uid_count}"
            try:
                lines = Path(table).read_text().splitlines()
            except OSError:
                lines = []
            if line not in lines:
                _run(["usermod", f"--add-{kind}", f"{tenant.uid_base}-{last}", tenant.name])
            # Any other range of the user (useradd's default, from before the console asked for none)
            # may overlap another tenant's: rootless podman would map them all.
            for other in lines:
                name, _, rest = other.partition(":")
                start, _, count = rest.partition(":")
                if name == tenant.name and other != line and start.isdigit() and count.isdigit():
                    _run(["usermod", f"--del-{kind}", f"{start}-{int(start) + int(count) - 1}", tenant.name])
        home.mkdir(exist_ok=True)
        os.chown(home, tenant.uid, tenant.uid)
        os.chmod(home, 0o700)
        podman_config_write(home, uid=tenant.uid, owner=tenant.uid)
        try:
            runtime_dir_ensure(tenant.uid, owner=tenant.uid)
        except LocalRuntimeError as exc:
            raise PermanentBackendError(str(exc)) from exc


def _run(argv: list[str], *, ok_if: str = "") -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)  # noqa: S603
    except FileNotFoundError as exc:
        raise PermanentBackendError(f"{argv[0]} is not installed on the console's host.") from exc
    except subprocess.TimeoutExpired as exc:
        raise TransientBackendError(f"{argv[0]} did not finish within 30 s.") from exc
    if done.returncode != 0 and not (ok_if and ok_if in done.stderr):
        raise PermanentBackendError(f"{argv[0]} {argv[-1]}: {done.stderr.strip()[:300]}")


# --- Slurm JWTs ---------------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt_mint(*, key: bytes, user: str, lifespan: int, now: float | None = None) -> str:
    """A token Slurm's ``auth/jwt`` accepts for ``user`` (HS256 over the cluster's ``jwt_key``)."""
    issued = int(time.time() if now is None else now)
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    claims = {"iat": issued, "exp": issued + int(lifespan), "sun": user}
    payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
    signature = hmac.new(key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64(signature)}"


def _home_of(name: str) -> str:
    """The home the user database names for ``name`` ("" when it names none)."""
    try:
        return pwd.getpwnam(name).pw_dir
    except KeyError:
        return ""
