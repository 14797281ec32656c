"""Benchmark and check: two web processes and three Celery workers against one PostgreSQL and Redis
behave as one console.

Creates its own PostgreSQL database (console_bench_scale), starts two uvicorn processes (one port
each) and three Celery workers on a queue of their own, on a Redis database of their own
(``BENCH_SCALE_REDIS_URL``, default db 11), with the simulated cloud at zero boot delay. Clients
launch ``BENCH_LAUNCHES`` instances (1, 2 or 4 cards) through ``POST /api/v1/instances/``, each
request going to the other web process than the last; then stop them all, then release them all.
A WebSocket subscribed on web process 1 watches instances launched, stopped and released through
web process 2.

It checks that the processes behave as one: every instance reached running exactly once and went
the expected path (each task ran once in effect), no card was ever held twice (sampled while
launching: every node's used cards equal its instances' cards, at the console and in the
simulated cloud), every card is back at the end, ``manage.py ledger_check`` passes, and the
WebSocket on web 1 received every status change of web 2's instances. Prints its figures and one
line of JSON; exits 1 if a check failed.

    .venv/bin/python bench/scale.py
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.launch import admin, api_user, cpu_seconds, free_port, percentile, world_seed  # noqa: E402  (sets its env; replaced below)

DB_NAME = "console_bench_scale"
REDIS_URL = os.environ.get("BENCH_SCALE_REDIS_URL", "redis://127.0.0.1:6379/11")
QUEUE = f"bench-scale-{os.getpid()}"
LAUNCHES = int(os.environ.get("BENCH_LAUNCHES", "100"))
CLIENTS = int(os.environ.get("BENCH_CLIENTS", "10"))
WEB_PROCESSES = 2
WORKERS = 3
WORKER_CONCURRENCY = int(os.environ.get("BENCH_WORKER_CONCURRENCY", "2"))
WATCHED = int(os.environ.get("BENCH_WATCHED", "5"))  # instances launched through web 2, watched on web 1
TIMEOUT_S = float(os.environ.get("BENCH_TIMEOUT_S", "300"))
EXPECTED_PATH = [
    ("", "requested"),
    ("requested", "scheduling"),
    ("scheduling", "provisioning"),
    ("provisioning", "running"),
    ("running", "stopping"),
    ("stopping", "stopped"),
    ("stopped", "releasing"),
    ("releasing", "released"),
]
WATCHED_STATUSES = ["provisioning", "running", "stopping", "stopped", "releasing", "released"]

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
os.environ.pop("CONSOLE_PROVISIONING_BACKENDS", None)

# One SQL statement sees one snapshot: per node, the cards the console counts as used against the
# cards of the instances placed on it. Any row is a card held twice (or leaked).
NODE_MISMATCH_SQL = """
SELECT n.name, n.total_cards - n.free_cards AS used, COALESCE(SUM(i.gpu_count), 0) AS held
FROM instances_node n LEFT JOIN instances_instance i ON (i.node_id = n.id OR i.extra_nodes ? n.name)
GROUP BY n.id HAVING n.total_cards - n.free_cards <> COALESCE(SUM(i.gpu_count), 0) OR n.free_cards < 0
"""
# The simulated cloud's own view: no node runs machines with more cards than it has.
SIM_OVERSUBSCRIBED_SQL = """
SELECT s.name FROM instances_simulatednode s JOIN instances_simulatedmachine m ON m.node_id = s.id
WHERE m.power = 'on' GROUP BY s.id HAVING SUM(m.cards) > s.cards
"""


def main() -> int:
    admin(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
    admin(f'CREATE DATABASE "{DB_NAME}"')
    started: list[subprocess.Popen] = []
    try:
        result = run(started)
    finally:
        stop_all(started)
        from django.db import connections

        connections.close_all()
        admin(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        try:
            import redis

            redis.Redis.from_url(REDIS_URL).delete(QUEUE)
        except Exception:  # noqa: S110 - best effort cleanup of our own queue
            pass
    print(json.dumps(result))
    return 0 if result["all_checks_pass"] else 1


def stop_all(started: list[subprocess.Popen]) -> None:
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in started:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def start_processes(started: list[subprocess.Popen]) -> list[int]:
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL} if not os.environ.get("BENCH_VERBOSE") else {}
    for n in range(1, WORKERS + 1):
        started.append(
            subprocess.Popen(
                [
                    str(ROOT / ".venv/bin/celery"),
                    "-A",
                    "console",
                    "worker",
                    "-Q",
                    QUEUE,
                    "-n",
                    f"scale{n}-{os.getpid()}@%h",
                    "--concurrency",
                    str(WORKER_CONCURRENCY),
                    "--without-heartbeat",
                    "--without-gossip",
                    "--without-mingle",
                    "--loglevel",
                    "WARNING",
                ],
                cwd=ROOT,
                env={**os.environ, "DATABASE_CONN_MAX_AGE": "60"},
                **quiet,
            )
        )
    ports = [free_port() for _ in range(WEB_PROCESSES)]
    for port in ports:
        started.append(
            subprocess.Popen(
                [
                    str(ROOT / ".venv/bin/uvicorn"),
                    "console.asgi:application",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--log-level",
                    "warning",
                    "--no-access-log",
                ],
                cwd=ROOT,
                env={**os.environ, "DATABASE_CONN_MAX_AGE": "0"},
                **quiet,
            )
        )
    return ports


def wait_healthy(ports: list[int]) -> None:
    import httpx

    for port in ports:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        else:
            raise RuntimeError(f"the web process on port {port} did not start")


class Watcher(threading.Thread):
    """A browser's live-status WebSocket on one web process, logged in with a session cookie."""

    def __init__(self, *, port: int, session_key: str) -> None:
        super().__init__(daemon=True)
        self.port, self.session_key = port, session_key
        self.messages: list[dict] = []
        self.ready = threading.Event()
        self.done = threading.Event()
        self.error: str = ""

    def run(self) -> None:
        from websockets.sync.client import connect

        try:
            with connect(
                f"ws://127.0.0.1:{self.port}/ws/events/",
                origin=f"http://127.0.0.1:{self.port}",
                additional_headers={"Cookie": f"sessionid={self.session_key}"},
                open_timeout=10,
            ) as socket:
                self.ready.set()
                while not self.done.is_set():
                    try:
                        raw = socket.recv(timeout=0.2)
                    except TimeoutError:
                        continue
                    self.messages.append(json.loads(raw))
        except Exception as exc:  # reported in the result, not raised in a thread
            self.error = f"{type(exc).__name__}: {exc}"
            self.ready.set()


def run(started: list[subprocess.Popen]) -> dict:
    import django

    django.setup()
    import httpx
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore
    from django.db import connection

    from billing.settlement import meters_settle_all
    from instances.models import Instance, InstanceEvent, Node
    from providers.simulated.models import SimulatedMachine

    combos = world_seed()
    users, tokens = zip(*(api_user(f"client{n}@example.com") for n in range(CLIENTS)), strict=True)
    watcher_user, watcher_token = api_user("watcher@example.com")
    session = SessionStore()
    session[SESSION_KEY] = str(watcher_user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = watcher_user.get_session_auth_hash()
    session.create()

    ports = start_processes(started)
    wait_healthy(ports)
    bases = [f"http://127.0.0.1:{port}" for port in ports]
    clients = [httpx.Client(base_url=base, timeout=60) for base in bases]

    def post(web: int, path: str, token: str, body: dict | None = None) -> httpx.Response:
        return clients[web].post(path, json=body or {}, headers={"Authorization": f"Bearer {token}"})

    def launch(web: int, token: str, region: str, gpu: str, count: int, name: str) -> tuple[float, float, str]:
        t0 = time.time()
        body = {"region": region, "gpu_model": gpu, "gpu_count": count, "image": "pytorch-2.5-cu124", "disk_gb": 50}
        response = post(web, "/api/v1/instances/", token, {**body, "name": name})
        if response.status_code != 201:
            raise RuntimeError(f"launch refused: {response.status_code} {response.text[:200]}")
        return t0, time.time() - t0, response.json()["id"]

    def wait_for(ids: list[str], status: str, timeout: float) -> dict[str, float]:
        """When each instance entered ``status`` (its event's time); raises if they did not all get there."""
        end = time.monotonic() + timeout
        while True:
            reached = dict(
                InstanceEvent.objects.filter(instance_id__in=ids, new=status, kind="status").values_list(
                    "instance_id", "created_at"
                )
            )
            if len(reached) >= len(ids):
                return {str(k): v.timestamp() for k, v in reached.items()}
            if time.monotonic() > end:
                stuck = Instance.objects.filter(pk__in=ids).exclude(status=status).values_list("status", flat=True)
                raise RuntimeError(f"{len(reached)} of {len(ids)} reached {status}; others: {sorted(set(stuck))}")
            time.sleep(0.05)

    mismatches: list[tuple] = []
    oversubscribed: list[str] = []
    samples = [0]
    sampling = threading.Event()

    def sample_allocation() -> None:
        from django.db import connection as thread_connection

        while not sampling.is_set():
            with thread_connection.cursor() as cursor:
                cursor.execute(NODE_MISMATCH_SQL)
                mismatches.extend(cursor.fetchall())
                cursor.execute(SIM_OVERSUBSCRIBED_SQL)
                oversubscribed.extend(row[0] for row in cursor.fetchall())
            samples[0] += 1
            time.sleep(0.05)
        thread_connection.close()

    # Warm up both web processes and every worker's first task (imports, connections).
    warm = [launch(w % 2, tokens[0], "cn-north-1", "rtx-4090", 1, f"warm-{w}")[2] for w in range(WORKERS * 2)]
    wait_for(warm, "running", 60)

    watcher = Watcher(port=ports[0], session_key=session.session_key)
    watcher.start()
    watcher.ready.wait(15)

    per_client = [LAUNCHES // CLIENTS + (1 if n < LAUNCHES % CLIENTS else 0) for n in range(CLIENTS)]
    launched: list[tuple[float, float, str, int]] = []
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(CLIENTS + 1)

    def client_thread(n: int) -> None:
        barrier.wait()
        for i in range(per_client[n]):
            region, gpu = combos[(n * 7 + i) % len(combos)]
            web = (n + i) % WEB_PROCESSES  # every client alternates between the web processes
            try:
                t0, elapsed, instance_id = launch(web, tokens[n], region, gpu, (1, 2, 4)[i % 3], f"c{n}-{i}")
            except Exception as exc:
                with lock:
                    errors.append(str(exc)[:200])
                continue
            with lock:
                launched.append((t0, elapsed, instance_id, web))

    def watched_thread() -> None:
        barrier.wait()
        for i in range(WATCHED):
            try:
                launched_one = launch(1, watcher_token, "cn-east-1", "a800-80g", 1, f"watched-{i}")
            except Exception as exc:
                with lock:
                    errors.append(str(exc)[:200])
                continue
            with lock:
                watched.append(launched_one[2])

    watched: list[str] = []
    sampler = threading.Thread(target=sample_allocation, daemon=True)
    sampler.start()
    roots = [p.pid for p in started]
    cpu_before = cpu_seconds(roots)
    threads = [threading.Thread(target=client_thread, args=(n,)) for n in range(CLIENTS)]
    threads.append(threading.Thread(target=watched_thread))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = [i for _, _, i, _ in launched]
    running_at = wait_for(ids + watched, "running", TIMEOUT_S)
    launch_cpu = cpu_seconds(roots) - cpu_before
    first = min(t0 for t0, _, _, _ in launched)
    last = max(running_at[i] for i in ids)

    # Every machine the console placed exists once in the simulated cloud.
    everyone = ids + watched + warm
    machines = SimulatedMachine.objects.filter(key__in=everyone).count()

    # Stop everything, alternating web processes, then release it all.
    def act(action: str, targets: list[tuple[str, int, str]]) -> list[str]:
        failures = []

        def worker(chunk: list[tuple[str, int, str]]) -> None:
            for instance_id, web, token in chunk:
                response = post(web, f"/api/v1/instances/{instance_id}/{action}/", token)
                if response.status_code >= 400:
                    with lock:
                        failures.append(f"{action} {instance_id}: {response.status_code}")

        chunks = [targets[n::CLIENTS] for n in range(CLIENTS)]
        pool = [threading.Thread(target=worker, args=(chunk,)) for chunk in chunks]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        return failures

    owner_token = {}
    for n in range(CLIENTS):
        owner = users[n]
        for instance_id in Instance.objects.filter(owner=owner).values_list("pk", flat=True):
            owner_token[str(instance_id)] = tokens[n]
    for instance_id in watched:
        owner_token[instance_id] = watcher_token
    targets = [
        (instance_id, 1 if instance_id in watched else k % WEB_PROCESSES, owner_token[instance_id])
        for k, instance_id in enumerate(everyone)
    ]
    t_stop = time.time()
    errors += act("stop", targets)
    stopped_at = wait_for(everyone, "stopped", TIMEOUT_S)
    stop_s = max(stopped_at.values()) - t_stop
    held_after_stop = Node.objects.exclude(free_cards=models_f("total_cards")).count()
    t_release = time.time()
    errors += act("release", targets)
    released_at = wait_for(everyone, "released", TIMEOUT_S)
    release_s = max(released_at.values()) - t_release
    sampling.set()
    sampler.join(5)
    with connection.cursor() as cursor:
        cursor.execute(NODE_MISMATCH_SQL)
        mismatches.extend(cursor.fetchall())
    time.sleep(1.0)  # the last live pushes are on their way to the watcher
    watcher.done.set()
    watcher.join(5)

    # Each instance went the expected path exactly once: no transition (and so no task) took effect twice.
    paths: dict[str, list[tuple[str, str]]] = {}
    for instance_id, old, new in (
        InstanceEvent.objects.filter(instance_id__in=everyone, kind="status")
        .order_by("created_at", "id")
        .values_list("instance_id", "old", "new")
    ):
        paths.setdefault(str(instance_id), []).append((old, new))
    wrong_paths = {i: p for i, p in paths.items() if p != EXPECTED_PATH}
    running_twice = sum(1 for p in paths.values() if p.count(("provisioning", "running")) != 1)
    cards_left = Node.objects.exclude(free_cards=models_f("total_cards")).count()
    machines_left = SimulatedMachine.objects.count()

    meters_settle_all()
    ledger = subprocess.run(
        [sys.executable, "manage.py", "ledger_check"], cwd=ROOT, env=os.environ, capture_output=True, text=True
    )

    seen: dict[str, list[str]] = {}
    for message in watcher.messages:
        if message.get("type") == "instance" and message.get("id") in watched:
            seen.setdefault(message["id"], []).append(message["status"])
    ws_events = sum(len(v) for v in seen.values())
    ws_complete = all(set(WATCHED_STATUSES) <= set(seen.get(i, [])) for i in watched) and len(watched) == WATCHED

    to_running = [(running_at[i] - t0) * 1000 for t0, _, i, _ in launched]
    api = [elapsed * 1000 for _, elapsed, _, _ in launched]
    by_web = [sum(1 for *_, web in launched if web == w) for w in range(WEB_PROCESSES)]
    for client in clients:
        client.close()
    checks = {
        "every_instance_running_once": running_twice == 0 and len(running_at) == len(ids) + len(watched),
        "expected_paths": not wrong_paths,
        "no_double_allocation": not mismatches and not oversubscribed,
        "cards_all_back": cards_left == 0 and held_after_stop == 0 and machines_left == 0,
        "one_machine_per_instance": machines == len(everyone),
        "ledger_ok": ledger.returncode == 0,
        "ws_cross_process": ws_complete and not watcher.error,
        "no_refusals": not errors,
    }
    print(f"launched {len(launched)} (+{len(watched)} watched, +{len(warm)} warm-up) through web processes {by_web}")
    print(f"request → running p50 {statistics.median(to_running):.0f} ms, p99 {percentile(to_running, 99):.0f} ms")
    print(f"API POST p50 {statistics.median(api):.0f} ms, p99 {percentile(api, 99):.0f} ms")
    print(f"stop all {stop_s:.1f} s, release all {release_s:.1f} s; allocation sampled {samples[0]} times")
    print(f"WebSocket on web 1 saw {ws_events} status changes of web 2's instances: {seen}")
    for name, ok in checks.items():
        print(f"  {'ok  ' if ok else 'FAIL'} {name}")
    if wrong_paths:
        print("unexpected paths:", list(wrong_paths.items())[:3], file=sys.stderr)
    if errors:
        print("refused:", errors[:5], file=sys.stderr)
    if ledger.returncode:
        print(ledger.stdout[-2000:], ledger.stderr[-2000:], file=sys.stderr)
    return {
        "launches": len(launched),
        "web_processes": WEB_PROCESSES,
        "workers": WORKERS,
        "worker_concurrency": WORKER_CONCURRENCY,
        "clients": CLIENTS,
        "launches_per_web_process": by_web,
        "request_to_running_p50_ms": round(statistics.median(to_running), 1),
        "request_to_running_p99_ms": round(percentile(to_running, 99), 1),
        "api_post_p50_ms": round(statistics.median(api), 1),
        "api_post_p99_ms": round(percentile(api, 99), 1),
        "throughput_running_per_s": round(len(to_running) / max(0.001, last - first), 1),
        "stop_all_s": round(stop_s, 2),
        "release_all_s": round(release_s, 2),
        "web_and_worker_cpu_ms_per_launch": round(launch_cpu * 1000 / max(1, len(launched)), 1),
        "allocation_samples": samples[0],
        "double_allocations": len(mismatches) + len(oversubscribed),
        "instances_running_twice": running_twice,
        "unexpected_paths": len(wrong_paths),
        "ledger_ok": ledger.returncode == 0,
        "ws_cross_process_events": ws_events,
        "ws_cross_process_expected": len(WATCHED_STATUSES) * WATCHED,
        "ws_error": watcher.error,
        "refused": len(errors),
        "cpu_cores": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "all_checks_pass": all(checks.values()),
    }


def models_f(name: str):
    from django.db.models import F

    return F(name)


if __name__ == "__main__":
    sys.exit(main())
