"""Benchmark: 200 launches from 20 concurrent API clients, a real Celery worker, the simulated cloud.

Creates its own PostgreSQL database (console_bench_launch), starts the console under uvicorn and a
Celery worker (Redis broker, on a queue of its own) as subprocesses, with the simulated backend at
zero boot delay. Each client launches 10 one-card instances through ``POST /api/v1/instances/``,
spread over every GPU model and region. Latency is measured from just before the request to the
instance's ``running`` event (the moment billing starts). Then it stops what it started, drops the
database and prints one JSON line.

The processes are the ones ``make run`` starts (``console/run.py``): one uvicorn process and a Celery
worker with two prefork processes. ``BENCH_WEB_WORKERS=2 BENCH_WORKER_CONCURRENCY=4`` gives the
configuration earlier figures were taken with (two web processes and four worker processes on two
cores: more processes than cores, and each costs more CPU per launch).

    .venv/bin/python bench/launch.py
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# Its own database: two engineers benching at once on one server must not drop each other's.
DB_NAME = os.environ.get("BENCH_DB_NAME", "console_bench_launch")
ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
QUEUE = f"bench-launch-{os.getpid()}"
CLIENTS = int(os.environ.get("BENCH_CLIENTS", "20"))
PER_CLIENT = int(os.environ.get("BENCH_PER_CLIENT", "10"))
WORKER_CONCURRENCY = int(os.environ.get("BENCH_WORKER_CONCURRENCY", "2"))  # make run's --worker-concurrency
WEB_WORKERS = int(os.environ.get("BENCH_WEB_WORKERS", "1"))  # make run starts one uvicorn process
WORKER_POOL = os.environ.get("BENCH_WORKER_POOL", "prefork")  # Celery's --pool: prefork (as make run) or threads
# BENCH_PYSPY=<folder>: run web and worker under py-spy (requirements-dev) and write their collapsed
# stacks there, to see where the CPU goes. The profiler's own CPU then counts too: not for figures.
PYSPY = os.environ.get("BENCH_PYSPY", "")

ENV = {
    "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{DB_NAME}",
    "REDIS_URL": REDIS_URL,
    "DJANGO_SETTINGS_MODULE": "console.settings",
    "DJANGO_DEBUG": "0",
    "CONSOLE_ENV": "bench",
    "CONSOLE_VAR_DIR": str(Path(tempfile.gettempdir()) / f"{DB_NAME}-var"),
    "CELERY_TASK_ALWAYS_EAGER": "0",
    "CELERY_TASK_DEFAULT_QUEUE": QUEUE,
    # Webhooks and mail to the same private queue: these workers serve them, no one else's do.
    "CELERY_WEBHOOKS_QUEUE": QUEUE,
    "CELERY_MAIL_QUEUE": QUEUE,
    "SIMULATED_BOOT_DELAY_S": "0",
    "INSTANCES_DEFAULT_GPU_QUOTA": "64",
    "LOG_LEVEL": "WARNING",
}
os.environ.update(ENV)


def admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(sql)


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q / 100 * (len(values) - 1)))]


def cpu_seconds(roots: list[int]) -> float:
    """User+system CPU of the processes under ``roots`` (they and their descendants), from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    parents, cpu = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / ticks
    total = 0.0
    for pid, seconds in cpu.items():
        node = pid
        while node > 1:
            if node in roots:
                total += seconds
                break
            node = parents.get(node, 0)
    return total


def children(pid: int) -> list[int]:
    """The direct children of ``pid``, from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
            except OSError:
                continue
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    admin(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
    admin(f'CREATE DATABASE "{DB_NAME}"')
    started: list[subprocess.Popen] = []
    try:
        result = run(started)
    finally:
        for process in started:
            if process.poll() is None:
                # Under py-spy, stop what it runs: it writes its stacks when its child exits.
                for pid in children(process.pid) if PYSPY else [process.pid]:
                    os.kill(pid, signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        from django.db import connections

        connections.close_all()
        admin(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        try:
            import redis

            redis.Redis.from_url(REDIS_URL).delete(QUEUE)
        except Exception:  # noqa: S110 - best effort cleanup of our own queue
            pass
    print(json.dumps(result))


GPU_SLUGS = ("h200", "h800", "a800-80g", "a100-40g", "l40s", "rtx-4090", "rtx-3090")


def world_seed() -> list[tuple[str, str]]:
    """Migrate the bench database, seed the catalogue and the simulated fleet; returns the (region, GPU
    model) pairs the clients launch on, so every model and region takes its share."""
    from django.core.management import call_command

    from instances.catalogue import catalogue_seed
    from instances.models import Region
    from instances.services import nodes_sync
    from instances.skus import catalogue_skus_sync

    call_command("migrate", verbosity=0)
    catalogue_seed()
    catalogue_skus_sync()
    nodes_sync(alias="default")
    return [(r.slug, g) for r in Region.objects.all() for g in GPU_SLUGS]


def api_user(email: str):
    """A user with money to spend and an API token; returns (user, token)."""
    from accounts.authentication import token_digest
    from accounts.models import APIToken, User
    from instances.tests.conftest import fund

    user = User.objects.create_user(email=email, password=None)
    fund(user, 10_000_000)
    raw = "gpuc_" + secrets.token_urlsafe(32)
    APIToken.objects.create(user=user, name="bench", prefix=raw[:12], digest=token_digest(raw))
    return user, raw


def profiled(name: str) -> list[str]:
    """The py-spy prefix of a process's command line when BENCH_PYSPY names a folder, else nothing."""
    if not PYSPY:
        return []
    Path(PYSPY).mkdir(parents=True, exist_ok=True)
    output = str(Path(PYSPY) / f"{name}.txt")
    return [
        str(ROOT / ".venv/bin/py-spy"),
        "record",
        "--subprocesses",
        "--gil",
        "--format",
        "raw",
        "-r",
        "500",
        "-o",
        output,
        "--",
    ]


def run(started: list[subprocess.Popen]) -> dict:
    import django

    django.setup()
    import httpx

    from instances.models import Instance, InstanceEvent

    combos = world_seed()
    tokens = [api_user(f"client{n}@example.com")[1] for n in range(CLIENTS)]

    port = free_port()
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL} if not os.environ.get("BENCH_VERBOSE") else {}
    started.append(
        subprocess.Popen(
            [
                *profiled("worker"),
                str(ROOT / ".venv/bin/celery"),
                "-A",
                "console",
                "worker",
                "-Q",
                QUEUE,
                "--pool",
                WORKER_POOL,
                "--concurrency",
                str(WORKER_CONCURRENCY),
                "--without-heartbeat",
                "--without-gossip",
                "--without-mingle",
                "--loglevel",
                "WARNING",
            ],
            cwd=ROOT,
            env=dict(os.environ),
            **quiet,
        )
    )
    # Web and worker run with the settings `make run` gives them: a connection pool per process.
    started.append(
        subprocess.Popen(
            [
                *profiled("web"),
                str(ROOT / ".venv/bin/uvicorn"),
                "console.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                str(WEB_WORKERS),
                "--log-level",
                "warning",
                "--no-access-log",
            ],
            cwd=ROOT,
            env=dict(os.environ),
            **quiet,
        )
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    else:
        raise RuntimeError("the web server did not start")

    def launch(client: httpx.Client, token: str, region: str, gpu: str, name: str) -> tuple[float, float, str]:
        t0 = time.time()
        response = client.post(
            "/api/v1/instances/",
            json={
                "region": region,
                "gpu_model": gpu,
                "gpu_count": 1,
                "image": "pytorch-2.5-cu124",
                "disk_gb": 50,
                "name": name,
            },
            headers={"Authorization": f"Bearer {token}"},
        )
        elapsed = time.time() - t0
        if response.status_code != 201:
            raise RuntimeError(f"launch refused: {response.status_code} {response.text}")
        return t0, elapsed, response.json()["id"]

    def wait_running(ids: list[str], timeout: float) -> dict[str, float]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            done = dict(
                InstanceEvent.objects.filter(instance_id__in=ids, new="running").values_list(
                    "instance_id", "created_at"
                )
            )
            failed = Instance.objects.filter(pk__in=ids, status="failed").count()
            if len(done) + failed >= len(ids):
                return {str(k): v.timestamp() for k, v in done.items()}
            time.sleep(0.05)
        raise RuntimeError(f"only {len(done)} of {len(ids)} instances reached running in {timeout}s")

    # Warm up, as a server that has been up a while is: every client launches once, all at once, so
    # each web process has served requests on as many threads as the clients keep busy (each of its
    # request threads has borrowed its database connection), and each worker process has run tasks.
    # Otherwise the figures below would count opening some twenty connections to PostgreSQL.
    warm: list[str] = []

    def warm_client(n: int) -> None:
        with httpx.Client(base_url=base, timeout=30) as client:
            region, gpu = combos[n % len(combos)]
            warm.append(launch(client, tokens[n], region, gpu, f"warm-{n}")[2])

    warmers = [threading.Thread(target=warm_client, args=(n,)) for n in range(CLIENTS)]
    for thread in warmers:
        thread.start()
    for thread in warmers:
        thread.join()
    wait_running(warm, 60)
    warm_ids = set(warm)

    requests: list[tuple[float, float, str]] = []
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(CLIENTS)

    def client_thread(n: int) -> None:
        with httpx.Client(base_url=base, timeout=60) as client:
            client.get("/healthz")
            barrier.wait()
            for i in range(PER_CLIENT):
                region, gpu = combos[(n * PER_CLIENT + i) % len(combos)]
                try:
                    outcome = launch(client, tokens[n], region, gpu, f"c{n}-{i}")
                except Exception as exc:
                    with lock:
                        errors.append(str(exc)[:200])
                    continue
                with lock:
                    requests.append(outcome)

    roots = [p.pid for p in started]  # the worker, then the web server
    cpu_before = [cpu_seconds([root]) for root in roots]
    threads = [threading.Thread(target=client_thread, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = [i for _, _, i in requests]
    if errors:
        print("refused:", errors[:5], file=sys.stderr)
    running_at = wait_running(ids, 120)
    worker_cpu, web_cpu = (cpu_seconds([root]) - before for root, before in zip(roots, cpu_before, strict=True))
    cpu_used = worker_cpu + web_cpu
    to_running = [(running_at[i] - t0) * 1000 for t0, _, i in requests if i in running_at]
    api = [elapsed * 1000 for _, elapsed, _ in requests]
    first = min(t0 for t0, _, _ in requests)
    last = max(running_at.values())
    failed = Instance.objects.filter(pk__in=ids, status="failed").count()
    assert not (warm_ids & set(ids))
    return {
        "launches": len(CLIENTS * [0]) * PER_CLIENT,
        "clients": CLIENTS,
        "accepted": len(requests),
        "refused": len(errors),
        "failed": failed,
        "request_to_running_p50_ms": round(statistics.median(to_running), 1),
        "request_to_running_p99_ms": round(percentile(to_running, 99), 1),
        "api_post_p50_ms": round(statistics.median(api), 1),
        "api_post_p99_ms": round(percentile(api, 99), 1),
        "throughput_running_per_s": round(len(to_running) / (last - first), 1),
        "wall_s": round(last - first, 2),
        "web_and_worker_cpu_ms_per_launch": round(cpu_used * 1000 / max(1, len(requests)), 1),
        "web_cpu_ms_per_launch": round(web_cpu * 1000 / max(1, len(requests)), 1),
        "worker_cpu_ms_per_launch": round(worker_cpu * 1000 / max(1, len(requests)), 1),
        "cpu_cores": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "worker_concurrency": WORKER_CONCURRENCY,
        "worker_pool": WORKER_POOL,
        "web_workers": WEB_WORKERS,
        "errors_sample": errors[:3],
    }


if __name__ == "__main__":
    main()
