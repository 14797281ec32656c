"""`make run`: the whole console on this machine, on PostgreSQL and Redis, kept running.

    python -m console.run [--port 8000] [--host 127.0.0.1]

1. Services. ``DATABASE_URL`` and ``REDIS_URL`` name the servers to use; each one left unset is
   started privately under ``var/`` (``console.embedded``) and stopped again on Ctrl-C. The URLs in
   use are written to ``var/run/services.env`` so that ``manage.py`` commands run by hand meanwhile
   (``shell``, ``createsuperuser``) find the same servers.
2. Schema and demo data: ``migrate`` and ``seed_demo``.
   A private OCI registry (``docker-registry``, storage in ``var/registry``) for the catalogue's
   images starts with the processes below, supervised like them, unless ``CONSOLE_REGISTRY`` names one.
3. Web (uvicorn), worker, notify (the worker of the webhook and mail queues), images (the worker of
   image saves, builds and disk snapshots) and beat (Celery) and
   the SSH gateway (``python -m gateway``, on
   ``GATEWAY_PORT``, 2222 unless set; left out when ``GATEWAY_ENABLED=0``), supervised: a process that exits on its own is started
   again after a short back-off, and the log says so (``worker exited with code -9; restarting it``).
   One process dying never takes the others down, unlike a Procfile runner that stops everything.
4. When the web server answers ``/healthz``, a banner says where to open it.

The private PostgreSQL and Redis are watched too (``ServiceWatch``): one that dies is started again,
with its data, and the log says when it went and when it came back.

Ctrl-C (or SIGTERM) stops web, worker and beat, then the private servers, in that order.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from console.embedded import (
    DEFAULT_PG_PORT,
    DEFAULT_REDIS_PORT,
    DEFAULT_REGISTRY_PORT,
    EmbeddedPostgres,
    EmbeddedRedis,
    EmbeddedRegistry,
    EmbeddedServiceError,
)

ROOT = Path(__file__).resolve().parent.parent
DEMO_STAFF = ("admin@example.com", os.environ.get("CONSOLE_DEMO_PASSWORD", "gpu-console-demo"))
# A process that stayed up this long before dying starts again at once; quicker deaths back off.
STABLE_AFTER_S = 30.0
MAX_BACKOFF_S = 30.0
PR_SET_CHILD_SUBREAPER = 36  # prctl(2)

_print_lock = threading.Lock()


def say(name: str, line: str) -> None:
    with _print_lock:
        sys.stdout.write(f"{name:<8}| {line.rstrip()}\n")
        sys.stdout.flush()


@dataclass
class Supervised:
    """One long-running process: its command, and how often it has been started again."""

    name: str
    argv: list[str]
    process: subprocess.Popen | None = None
    restarts: int = 0
    started_at: float = 0.0
    backoff_s: float = 1.0
    next_start: float = 0.0
    pumps: list[threading.Thread] = field(default_factory=list)


class Supervisor:
    """Starts processes, copies their output into one log with a name column, restarts the ones that die."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.children: list[Supervised] = []
        self.stopping = threading.Event()

    def add(self, name: str, argv: list[str]) -> None:
        self.children.append(Supervised(name=name, argv=argv))

    def _start(self, child: Supervised) -> None:
        child.process = subprocess.Popen(  # noqa: S603 (our own commands)
            child.argv,
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            # Its own process group: Ctrl-C reaches this supervisor only, which stops children in order.
            start_new_session=True,
        )
        child.started_at = time.monotonic()
        pump = threading.Thread(target=self._pump, args=(child, child.process), daemon=True)
        pump.start()
        child.pumps = [pump]

    @staticmethod
    def _pump(child: Supervised, process: subprocess.Popen) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            say(child.name, line)

    def start_all(self) -> None:
        for child in self.children:
            self._start(child)

    def watch_once(self) -> None:
        """Restart whatever exited (after its back-off); called about every 0.2 s."""
        now = time.monotonic()
        for child in self.children:
            process = child.process
            if process is None:
                if now >= child.next_start and not self.stopping.is_set():
                    child.restarts += 1
                    say("console", f"starting {child.name} again (restart {child.restarts})")
                    self._start(child)
                continue
            code = process.poll()
            if code is None or self.stopping.is_set():
                continue
            for pump in child.pumps:
                pump.join(timeout=1)
            lived = now - child.started_at
            child.backoff_s = 1.0 if lived >= STABLE_AFTER_S else min(child.backoff_s * 2, MAX_BACKOFF_S)
            child.next_start = now + (0 if lived >= STABLE_AFTER_S else child.backoff_s)
            child.process = None
            say("console", f"{child.name} exited with code {code}; restarting it in {child.next_start - now:.0f} s")

    def stop_all(self, timeout: float = 15.0) -> None:
        self.stopping.set()
        for child in self.children:
            if child.process is not None and child.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for child in self.children:
            if child.process is None:
                continue
            try:
                child.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                say("console", f"{child.name} did not stop within {timeout:.0f} s; killing it")
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.process.pid, signal.SIGKILL)
                child.process.wait()


class Service(Protocol):
    """A private server ``make run`` started (``console.embedded``): it says whether it is alive, and starts."""

    def alive(self) -> bool: ...

    def start(self) -> str: ...


@dataclass
class Watched:
    name: str
    service: Service
    failures: int = 0  # checks in a row that found it dead
    down_since: float = 0.0
    backoff_s: float = 1.0
    next_try: float = 0.0


class ServiceWatch:
    """Keeps the private PostgreSQL and Redis up, as the supervisor keeps web and the workers up.

    A server killed under the console used to stay down (and, for Redis, a zombie: nothing reaped it)
    until someone started it by hand, while every request failed. Here each is checked every
    ``every_s``; one found dead twice in a row is started again (its data kept: PostgreSQL's cluster,
    Redis's append-only file), backing off while it keeps failing, and the log says when it went and
    when it came back. PostgreSQL's postmaster is not our child (``pg_ctl`` starts it and exits):
    ``reap_orphans`` collects what it leaves, because this process is their subreaper (``main``).
    """

    def __init__(self, every_s: float = 2.0) -> None:
        self.every_s = every_s
        self.watched: list[Watched] = []
        self._next_check = 0.0

    def add(self, name: str, service: Service) -> None:
        self.watched.append(Watched(name, service))

    def check(self, *, force: bool = False) -> None:
        now = time.monotonic()  # wall-clock: the watch's own period and back-off
        if not force and now < self._next_check:
            return
        self._next_check = now + self.every_s
        for item in self.watched:
            if item.service.alive():
                if item.down_since:
                    say("console", f"{item.name} is back after {now - item.down_since:.0f} s")
                item.failures, item.down_since, item.backoff_s = 0, 0.0, 1.0
                continue
            item.failures += 1
            if item.failures < 2 or now < item.next_try:
                continue  # one missed check may be a busy server; a second one is not
            if not item.down_since:
                item.down_since = now
                say("console", f"{item.name} stopped; starting it again")
            try:
                item.service.start()
            except EmbeddedServiceError as exc:
                item.next_try = now + item.backoff_s
                say("console", f"{item.name} did not start ({exc}); trying again in {item.backoff_s:.0f} s")
                item.backoff_s = min(item.backoff_s * 2, MAX_BACKOFF_S)


def reap_orphans(known: set[int]) -> None:
    """Collect the exit status of children that are not the supervisor's (a killed postmaster and its
    backends, handed to this process as their subreaper): left alone they stay zombies, and a zombie's
    pid in ``postmaster.pid`` stops PostgreSQL from starting again."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None or info.si_pid in known:
            return  # nothing to collect, or a supervised child: its own poll() collects it
        with contextlib.suppress(ChildProcessError):
            os.waitpid(info.si_pid, os.WNOHANG)


def _become_subreaper() -> None:
    """Orphans of our children (PostgreSQL's postmaster, started by ``pg_ctl``) become ours to reap."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _announce(url: str, mailbox: bool, ssh: str = "", texts: bool = False) -> None:
    lines = [
        "GPU Console is running",
        "",
        f"  Open       {url}",
        f"  Staff      {DEMO_STAFF[0]} / {DEMO_STAFF[1]}",
        (f"  Mailbox    {url}dev/mail/  (sign-up e-mails)" if mailbox else "  Mail       sent through EMAIL_HOST"),
        *([f"  Texts      {url}dev/texts/  (sign-up codes by SMS)"] if texts else []),
        f"  API docs   {url}api/docs/",
        *([f"  SSH        gateway on {ssh} (ssh -p PORT <instance id>@HOST)"] if ssh else []),
        "",
        "Ctrl-C stops web, worker, beat, the SSH gateway and the private servers.",
    ]
    width = max(len(line) for line in lines) + 4
    out = ["┌" + "─" * width + "┐", *("│  " + line.ljust(width - 2) + "│" for line in lines), "└" + "─" * width + "┘"]
    for line in out:
        say("console", line)


def _wait_until_up(url: str, supervisor: Supervisor, timeout: float = 180.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not supervisor.stopping.is_set():
        try:
            with urllib.request.urlopen(url + "healthz", timeout=2) as response:  # noqa: S310 (our own URL)
                if response.status == 200:
                    return True
        except OSError:
            pass
        supervisor.watch_once()
        time.sleep(0.3)
    return False


def _manage(env: dict[str, str], *args: str) -> None:
    python = sys.executable
    result = subprocess.run([python, "manage.py", *args], cwd=ROOT, env=env, check=False)  # noqa: S603
    if result.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args)} failed (exit {result.returncode}); see above.")


def _celery_worker(bin_dir: Path, *, concurrency: int, extra: tuple[str, ...] = ()) -> list[str]:
    """The command line of a Celery worker `make run` starts: every one with the same flags, ``extra``
    naming its queues and node name where it is not the default worker."""
    return [
        str(bin_dir / "celery"),
        "-A",
        "console",
        "worker",
        "--loglevel",
        "INFO",
        "--concurrency",
        str(concurrency),
        *extra,
        "--without-heartbeat",
        "--without-gossip",
        "--without-mingle",
    ]


def content_host_default(env: dict[str, str], *, port: int) -> None:
    """In development, user content on hosts of its own on this port (``apps.localhost:<port>``, as
    settings.DEVELOPMENT_CONTENT_HOST), never on the console's origin, unless ``CONSOLE_PROXY_HOST`` says
    otherwise. Browsers resolve every subdomain of localhost to the loopback address without DNS."""
    if env.get("CONSOLE_ENV") == "development":
        env.setdefault("CONSOLE_PROXY_HOST", f"apps.localhost:{port}")


def registry_default(env: dict[str, str], *, var: Path) -> EmbeddedRegistry | None:
    """The private registry `make run` starts (and names in ``env``) unless ``CONSOLE_REGISTRY`` names one."""
    if env.get("CONSOLE_REGISTRY"):
        env.setdefault("CONSOLE_REGISTRY_TLS_VERIFY", "1")
        return None
    registry = EmbeddedRegistry(var / "registry", port=int(env.get("EMBEDDED_REGISTRY_PORT", DEFAULT_REGISTRY_PORT)))
    if not registry.installed():
        # The console runs without one (the simulated cloud needs no images); publishing says what is missing.
        say("console", "Registry: none (docker-registry is not installed: scripts/container-deps.sh installs it)")
        env["CONSOLE_REGISTRY"], env["CONSOLE_REGISTRY_TLS_VERIFY"] = "", "1"
        return None
    env["CONSOLE_REGISTRY"] = registry.address
    env["CONSOLE_REGISTRY_TLS_VERIFY"] = "0"  # plain HTTP on the loopback address
    return registry


def images_to_publish(env: dict[str, str], *, records: Path, registry: EmbeddedRegistry | None) -> list[str]:
    """The built instance images `make run` publishes to its own registry once it has started: with the
    local backend on (``CONSOLE_LOCAL_BACKEND``, whose `make run` builds them) and the embedded registry,
    each one whose build record is in ``records`` (``var/images/<name>.json``, as scripts/images.py
    writes them), so the region "local" offers it
    with its digest pinned at launch (the apps' images too: the marketplace's CPU chat and MLflow). None for a registry of the operator's (``make images-publish``)."""
    local = env.get("CONSOLE_LOCAL_BACKEND", "").strip().lower() in {"1", "true", "yes", "on"}
    if not local or registry is None:
        return []
    return [name for name in ("minimal", "llama-server", "mlflow") if (records / f"{name}.json").is_file()]


def _publish_in_background(
    env: dict[str, str], names: list[str], registry: EmbeddedRegistry, *, records: Path
) -> threading.Thread:
    """``manage.py images_publish <names>`` once the registry answers, beside the running console (a
    first push takes a minute or so; a cached one seconds), its output in the log as "images"."""

    def publish() -> None:
        host, _colon, port = registry.address.rpartition(":")
        deadline = time.monotonic() + 60  # wall-clock: the registry's first start on a busy host
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=1):
                break
            time.sleep(0.5)
        result = subprocess.run(  # noqa: S603 (our own command)
            [sys.executable, "manage.py", "images_publish", "--records", str(records), *names],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        for line in (result.stdout + result.stderr).splitlines():
            say("images", line)

    thread = threading.Thread(target=publish, name="images-publish", daemon=True)
    thread.start()
    return thread


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Start the GPU console: services, web, worker and beat.")
    parser.add_argument("--host", default=os.environ.get("CONSOLE_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("CONSOLE_PORT", "8000")))
    parser.add_argument("--worker-concurrency", type=int, default=2)
    args = parser.parse_args(argv)

    var = Path(os.environ.get("CONSOLE_VAR_DIR", ROOT / "var"))
    env = dict(os.environ)
    env.setdefault("CONSOLE_ENV", "development")
    content_host_default(env, port=args.port)
    env["PYTHONUNBUFFERED"] = "1"
    postgres: EmbeddedPostgres | None = None
    redis: EmbeddedRedis | None = None
    supervisor = Supervisor(env)

    def on_signal(signum, frame) -> None:
        supervisor.stopping.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    _become_subreaper()
    services = ServiceWatch()
    try:
        notes: list[str] = []
        if not env.get("DATABASE_URL"):
            postgres = EmbeddedPostgres(
                var / "postgres", port=int(env.get("EMBEDDED_PG_PORT", DEFAULT_PG_PORT)), log=notes
            )
            started = time.monotonic()
            env["DATABASE_URL"] = postgres.start()
            for note in notes:
                say("console", note)
            services.add("PostgreSQL", postgres)
            say(
                "console",
                f"PostgreSQL (private, var/postgres) on 127.0.0.1:{postgres.port}, "
                f"ready in {time.monotonic() - started:.1f} s",
            )
        else:
            say("console", "PostgreSQL: DATABASE_URL")
        if not env.get("REDIS_URL"):
            redis = EmbeddedRedis(var / "redis", port=int(env.get("EMBEDDED_REDIS_PORT", DEFAULT_REDIS_PORT)))
            env["REDIS_URL"] = redis.start()
            services.add("Redis", redis)
            say("console", f"Redis (private Valkey, var/redis) on 127.0.0.1:{redis.port}")
        else:
            say("console", "Redis: REDIS_URL")
        registry = registry_default(env, var=var)
        if registry is not None:
            # Supervised like web and the workers: started again if it dies.
            supervisor.add("registry", registry.argv())
            say("console", f"Registry (private docker-registry, var/registry) on {registry.address}")
        elif env.get("CONSOLE_REGISTRY"):
            say("console", f"Registry: CONSOLE_REGISTRY ({env['CONSOLE_REGISTRY']})")
        run_dir = var / "run"
        run_dir.mkdir(parents=True, exist_ok=True)
        services_env = run_dir / "services.env"
        services_env.write_text(
            f"DATABASE_URL={env['DATABASE_URL']}\nREDIS_URL={env['REDIS_URL']}\n"
            f"CONSOLE_REGISTRY={env['CONSOLE_REGISTRY']}\nCONSOLE_REGISTRY_TLS_VERIFY={env['CONSOLE_REGISTRY_TLS_VERIFY']}\n"
        )
        services_env.chmod(0o600)

        _manage(env, "migrate", "--noinput")
        _manage(env, "seed_demo")

        bin_dir = Path(sys.executable).parent
        supervisor.add(
            "web",
            [
                str(bin_dir / "uvicorn"),
                "console.asgi:application",
                "--host",
                args.host,
                "--port",
                str(args.port),
                "--no-server-header",
                # The console alone decides whom to believe about the client (core/proxies.py).
                "--no-proxy-headers",
            ],
        )
        supervisor.add("worker", _celery_worker(bin_dir, concurrency=args.worker_concurrency))
        # Webhook deliveries and e-mail on their own queues (settings.CELERY_TASK_ROUTES), served by
        # their own worker: a user's slow receivers can fill it, never the worker that runs machines.
        notify_queues = ",".join((env.get("CELERY_WEBHOOKS_QUEUE", "webhooks"), env.get("CELERY_MAIL_QUEUE", "mail")))
        supervisor.add("notify", _celery_worker(bin_dir, concurrency=2, extra=("-Q", notify_queues, "-n", "notify@%h")))
        # Image saves, builds and disk snapshots (minutes each) on a queue and worker of their own, likewise.
        images_queue = env.get("CELERY_IMAGES_QUEUE", "images")
        supervisor.add("images", _celery_worker(bin_dir, concurrency=1, extra=("-Q", images_queue, "-n", "images@%h")))
        supervisor.add("beat", [str(bin_dir / "celery"), "-A", "console", "beat", "--loglevel", "INFO"])
        gateway_port = int(env.get("GATEWAY_PORT", "2222"))
        gateway = env.get("GATEWAY_ENABLED", "1").strip().lower() in {"1", "true", "yes", "on"}
        if gateway:
            # The same address as the web server: loopback unless --host says otherwise.
            supervisor.add(
                "gateway", [sys.executable, "-m", "gateway", "--host", args.host, "--port", str(gateway_port)]
            )
        supervisor.start_all()
        host = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host  # noqa: S104 (a comparison)
        url = f"http://{host}:{args.port}/"
        records = ROOT / "var" / "images"  # where scripts/images.py writes, whatever CONSOLE_VAR_DIR says
        publish = images_to_publish(env, records=records, registry=registry)
        if publish and registry is not None:
            say("console", f"Publishing {', '.join(publish)} to the registry in the background")
            _publish_in_background(env, publish, registry, records=records)
        if _wait_until_up(url, supervisor):
            _announce(
                url,
                mailbox=not env.get("EMAIL_HOST"),
                ssh=f"{host}:{gateway_port}" if gateway else "",
                texts=not env.get("IDENTITY_SMS_BACKEND"),
            )
        elif not supervisor.stopping.is_set():
            say("console", f"The web server did not answer at {url}; see its log above. Still trying.")
        while not supervisor.stopping.is_set():
            supervisor.watch_once()
            services.check()
            reap_orphans({child.process.pid for child in supervisor.children if child.process is not None})
            time.sleep(0.2)
        say("console", "stopping web, worker, beat and the gateway")
        return 0
    except EmbeddedServiceError as exc:
        say("console", str(exc))
        return 1
    finally:
        supervisor.stop_all()
        if redis is not None:
            say("console", "stopping Redis")
            redis.stop()
        if postgres is not None:
            say("console", "stopping PostgreSQL")
            postgres.stop()


if __name__ == "__main__":
    sys.exit(main())
