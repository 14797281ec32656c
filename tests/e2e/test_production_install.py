"""The production install: a clean virtualenv of requirements.txt alone (what deploy/Dockerfile does),
CONSOLE_ENV=production (TLS redirect off: no proxy in front here), web, worker and beat as separate
processes on PostgreSQL and Redis, mail over SMTP. The newcomer's session passes there too.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import time
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import clean_env, free_port, wait_for_log
from tests.e2e.flow import newcomer_first_session
from tests.e2e.smtp_sink import SMTPSink

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]
# The server the tests run on (`make test`'s, or DATABASE_URL's), as its superuser.
SERVER = urlsplit(os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:54328/console")
ADMIN_URL = urlunsplit(SERVER._replace(path="/postgres"))
DB_NAME = "console_e2e_production"
REDIS_URL = re.sub(r"/\d+$", "/9", os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15"))


@pytest.fixture(scope="module")
def production(clone, tmp_path_factory):
    try:
        with psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{DB_NAME}"')
    except psycopg.OperationalError as exc:
        pytest.skip(f"needs the PostgreSQL at {ADMIN_URL}: {exc}")
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()

    venv = clone / "prod-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin/pip"), "install", "-q", "--require-hashes", "-r", "requirements.txt"],
        cwd=clone,
        check=True,
        env=clean_env(),
    )
    logs = tmp_path_factory.mktemp("e2e-production")
    port = free_port()
    with SMTPSink() as sink:
        env = clean_env(
            CONSOLE_ENV="production",
            DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
            DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
            CONSOLE_PROXY_HOST=f"apps.localhost:{port}",
            DJANGO_SECURE_SSL_REDIRECT="0",
            DATABASE_URL=urlunsplit(SERVER._replace(path=f"/{DB_NAME}")),
            REDIS_URL=REDIS_URL,
            CONSOLE_DEMO_MODE="1",  # the simulated cloud: there is no GPU here
            EMAIL_HOST="127.0.0.1",
            EMAIL_PORT=str(sink.port),
            EMAIL_USE_TLS="0",
            STATIC_ROOT=str(clone / "prod-static"),
            CONSOLE_VAR_DIR=str(clone / "prod-var"),
            PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
        )
        python = str(venv / "bin/python")
        for step in (["collectstatic", "--noinput", "-v0"], ["migrate", "--noinput", "-v0"], ["catalogue_seed"]):
            subprocess.run([python, "manage.py", *step], cwd=clone, env=env, check=True)
        commands = {
            "web": [str(venv / "bin/uvicorn"), "console.asgi:application", "--host", "127.0.0.1", "--port", str(port)],
            "worker": [str(venv / "bin/celery"), "-A", "console", "worker", "--concurrency", "2", "--loglevel", "INFO"],
            # Webhooks and mail on their own queues and worker, as deploy/ runs them (CELERY_TASK_ROUTES).
            "notify": [
                str(venv / "bin/celery"),
                "-A",
                "console",
                "worker",
                "-Q",
                "webhooks,mail",
                "-n",
                "notify@%h",
                "--concurrency",
                "2",
                "--loglevel",
                "INFO",
            ],
            # Image saves, builds and disk snapshots on a queue and worker of their own, likewise.
            "images": [
                str(venv / "bin/celery"),
                "-A",
                "console",
                "worker",
                "-Q",
                "images",
                "-n",
                "images@%h",
                "--concurrency",
                "1",
                "--loglevel",
                "INFO",
            ],
            "beat": [
                str(venv / "bin/celery"),
                "-A",
                "console",
                "beat",
                "--loglevel",
                "INFO",
                "--schedule",
                str(clone / "prod-var/celerybeat-schedule"),
            ],
        }
        processes = {}
        for name, argv in commands.items():
            with (logs / f"{name}.log").open("w") as out:
                processes[name] = subprocess.Popen(argv, cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_for_log(logs / "worker.log", "ready.", 60, processes["worker"])
            wait_for_log(logs / "notify.log", "ready.", 60, processes["notify"])
            url = f"http://127.0.0.1:{port}/"
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    if httpx.get(url + "readyz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.3)
            yield {"url": url, "sink": sink, "processes": processes, "logs": logs}
        finally:
            for process in processes.values():
                process.terminate()
            for process in processes.values():
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
            with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')


def test_the_production_install_is_ready_and_says_it_runs_demo_parts(production):
    ready = httpx.get(production["url"] + "readyz", timeout=5)
    assert ready.status_code == 200, ready.text
    page = httpx.get(production["url"], timeout=5)
    assert page.status_code == 200
    assert "Strict-Transport-Security" not in page.headers or page.url.scheme == "http"
    assert "demo" in page.text.lower()


def test_a_newcomer_s_session_passes_on_the_production_install(production, chromium, shots):
    sink: SMTPSink = production["sink"]

    def open_link_from_smtp(page: Page, email: str) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not sink.body_of_last_to(email):
            time.sleep(0.2)
        body = sink.body_of_last_to(email)
        link = re.search(r"https?://\S+/accounts/confirm-email/\S+/", body)
        assert link, f"no verification link in the mail: {body!r}"
        # Production links say https (a TLS proxy is in front); this one is reached directly over http.
        page.goto(link.group(0).replace("https://", "http://", 1))

    page = chromium.new_page(viewport={"width": 1366, "height": 900})
    try:
        times = newcomer_first_session(page, production["url"], "prod-newcomer@example.com", open_link_from_smtp, shots)
        expect(page.locator(".banner-demo")).to_be_visible()  # every page says it runs demo parts
    finally:
        page.screenshot(path=str(shots / "production-last.png"), full_page=True)
        page.close()
    print("\nproduction newcomer steps (s):", json.dumps(times))
    for name, process in production["processes"].items():
        assert process.poll() is None, f"{name} exited: {(production['logs'] / f'{name}.log').read_text()[-2000:]}"
