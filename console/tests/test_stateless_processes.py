"""Web and worker processes keep no state of their own: two web processes and two Celery workers on
one PostgreSQL and Redis behave as one console.

Real processes (uvicorn and ``celery worker``) against the test database and the test Redis: a
session made by one process is valid on the other, a WebSocket on web 1 hears every status change of
instances launched, stopped and released through web 2 (pushed by web 2 and by whichever worker ran
the task), and every task takes effect once. ``bench/scale.py`` does the same at scale, with timings.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from django.db import connection

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
WORKER_FLAGS = ["--concurrency", "1", "--without-heartbeat", "--without-gossip", "--without-mingle"]
WEB_FLAGS = ["--host", "127.0.0.1", "--log-level", "warning", "--no-access-log"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def console_processes(transactional_db):
    """Two web processes (their base URLs) and two workers, sharing the test database and Redis."""
    import httpx
    import redis

    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (DATABASE_URL): processes share the database")
    try:
        redis.Redis.from_url(REDIS_URL, socket_timeout=5).ping()
    except Exception:
        pytest.skip(f"Redis is not reachable at {REDIS_URL}")
    db = connection.settings_dict
    queue = f"test-stateless-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
        "REDIS_URL": REDIS_URL,
        "CONSOLE_ENV": "test",
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "CELERY_TASK_DEFAULT_QUEUE": queue,
        # Webhooks and mail to the same private queue: these workers serve them, no one else's do.
        "CELERY_WEBHOOKS_QUEUE": queue,
        "CELERY_MAIL_QUEUE": queue,
        "CELERY_IMAGES_QUEUE": queue,
        "SIMULATED_BOOT_DELAY_S": "0",
        "LOG_LEVEL": "WARNING",
    }
    env.pop("CONSOLE_PROVISIONING_BACKENDS", None)
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    bin_dir = Path(sys.executable).parent
    processes = [
        subprocess.Popen(
            [str(bin_dir / "celery"), "-A", "console", "worker", "-Q", queue, "-n", f"{queue}-{n}@%h", *WORKER_FLAGS],
            cwd=ROOT,
            env=env,
            **quiet,
        )
        for n in (1, 2)
    ]
    ports = [_free_port(), _free_port()]
    processes += [
        subprocess.Popen(
            [str(bin_dir / "uvicorn"), "console.asgi:application", "--port", str(port), *WEB_FLAGS],
            cwd=ROOT,
            env=env,
            **quiet,
        )
        for port in ports
    ]
    bases = [f"http://127.0.0.1:{port}" for port in ports]

    def up(base: str) -> bool:
        try:
            return httpx.get(base + "/healthz", timeout=10).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        for base in bases:
            _wait(lambda base=base: up(base), 60, f"{base} to answer")
        yield bases
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
        redis.Redis.from_url(REDIS_URL).delete(queue)


def _session_for(user) -> str:
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    return session.session_key


def _token_for(user) -> str:
    from accounts.authentication import token_digest
    from accounts.models import APIToken

    raw = "gpuc_" + secrets.token_urlsafe(32)
    APIToken.objects.create(user=user, name="test", prefix=raw[:12], digest=token_digest(raw))
    return raw


class LiveStatus(threading.Thread):
    """The page's live-status WebSocket, on one web process."""

    def __init__(self, base: str, session_key: str) -> None:
        super().__init__(daemon=True)
        self.url = base.replace("http://", "ws://") + "/ws/events/"
        self.origin, self.session_key = base, session_key
        self.messages: list[dict] = []
        self.ready, self.done = threading.Event(), threading.Event()

    def run(self) -> None:
        from websockets.exceptions import ConnectionClosed
        from websockets.sync.client import connect

        try:
            self._listen(connect)
        except ConnectionClosed:  # the server went away (the test is over): what was heard is kept
            self.ready.set()

    def _listen(self, connect) -> None:
        with connect(
            self.url, origin=self.origin, additional_headers={"Cookie": f"sessionid={self.session_key}"}
        ) as socket_:
            self.ready.set()
            while not self.done.is_set():
                try:
                    # wall-clock: not a limit, a poll of `done`; a slow message is read on the next turn
                    self.messages.append(json.loads(socket_.recv(timeout=0.2)))
                except TimeoutError:
                    continue

    def statuses(self, instance_id: str) -> list[str]:
        """The statuses heard, each once in a row: a boot also pushes its stages (image pulled,
        container started…) under the same status, for the page's launch timeline."""
        heard = [m["status"] for m in self.messages if m.get("type") == "instance" and m.get("id") == instance_id]
        return [status for n, status in enumerate(heard) if n == 0 or heard[n - 1] != status]


def test_two_web_processes_and_two_workers_behave_as_one(console_processes, alice):
    import httpx

    from instances.catalogue import catalogue_seed
    from instances.models import Instance, InstanceEvent
    from instances.tests.conftest import fund

    web1, web2 = console_processes
    catalogue_seed()
    fund(alice, 1_000_000)
    session_key, token = _session_for(alice), _token_for(alice)
    cookies = {"sessionid": session_key}
    # A session is not a process's: both web processes know it.
    for base in (web1, web2):
        assert httpx.get(base + "/dashboard/", cookies=cookies).status_code == 200
    live = LiveStatus(web1, session_key)
    live.start()
    assert live.ready.wait(15)

    headers = {"Authorization": f"Bearer {token}"}
    body = {"region": "cn-north-1", "gpu_model": "a800-80g", "gpu_count": 2, "image": "pytorch-2.5-cu124"}
    ids = []
    for n in range(4):  # alternate the web processes
        response = httpx.post(
            (web1, web2)[n % 2] + "/api/v1/instances/", json={**body, "disk_gb": 50}, headers=headers, timeout=30
        )
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])

    def all_in(status: str) -> bool:
        return Instance.objects.filter(pk__in=ids, status=status).count() == len(ids)

    _wait(lambda: all_in("running"), 60, "every instance to run")
    for n, instance_id in enumerate(ids):
        assert httpx.post(f"{(web2, web1)[n % 2]}/api/v1/instances/{instance_id}/stop/", headers=headers).is_success
    _wait(lambda: all_in("stopped"), 60, "every instance to stop")
    watched = ids[1]  # launched through web 2, stopped through web 1
    _wait(lambda: live.statuses(watched)[-1:] == ["stopped"], 10, "web 1's socket to hear web 2's instance")
    live.done.set()
    live.join(5)

    assert live.statuses(watched) == ["provisioning", "running", "stopping", "stopped"]
    for instance_id in ids:
        path = list(
            InstanceEvent.objects.filter(instance_id=instance_id).order_by("created_at", "id").values_list("new")
        )
        assert [p[0] for p in path] == ["requested", "scheduling", "provisioning", "running", "stopping", "stopped"]
    from instances.models import Node

    assert all(n.free_cards == n.total_cards for n in Node.objects.all())
