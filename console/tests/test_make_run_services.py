"""`make run`'s own parts: the private PostgreSQL and Redis, the supervisor, and settings that refuse
to run on anything but PostgreSQL and Redis outside the test suite."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import psycopg
import pytest
import redis
from django.conf import settings

from console.embedded import EmbeddedPostgres, EmbeddedRedis, EmbeddedServiceError
from console.run import ServiceWatch, Supervisor, _become_subreaper, reap_orphans


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_private_postgresql_starts_takes_connections_with_its_password_and_stops(tmp_path):
    server = EmbeddedPostgres(tmp_path / "postgres", port=_free_port())
    url = server.start()
    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            assert conn.execute("SELECT current_database(), current_user").fetchone() == ("console", "console")
            assert conn.execute("SHOW server_encoding").fetchone() == ("UTF8",)
        wrong = url.replace(url.split(":")[2].split("@")[0], "not-the-password")
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(wrong, connect_timeout=5)
        assert server.start() == url  # a second start finds it running
    finally:
        server.stop()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=2)


def test_the_private_redis_needs_its_password_and_stops_with_the_console(tmp_path):
    server = EmbeddedRedis(tmp_path / "redis", port=_free_port())
    url = server.start()
    try:
        assert redis.Redis.from_url(url).ping()
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(host="127.0.0.1", port=server.port).ping()
    finally:
        server.stop()
    with pytest.raises(redis.ConnectionError):
        redis.Redis.from_url(url, socket_connect_timeout=5).ping()


def test_a_port_taken_by_another_program_is_refused_with_a_way_out(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(EmbeddedServiceError, match="EMBEDDED_REDIS_PORT"):
            EmbeddedRedis(tmp_path / "redis", port=port).start()


def test_the_supervisor_restarts_a_process_that_dies_and_says_so(capsys):
    supervisor = Supervisor(dict(os.environ))
    supervisor.add("sleeper", [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"])
    supervisor.start_all()
    try:
        first = supervisor.children[0].process
        os.kill(first.pid, signal.SIGKILL)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            supervisor.watch_once()
            child = supervisor.children[0]
            if child.process is not None and child.process is not first and child.process.poll() is None:
                break
            time.sleep(0.1)
        assert supervisor.children[0].restarts == 1
        out = capsys.readouterr().out
        assert "sleeper exited with code -9; restarting it" in out
        assert "starting sleeper again (restart 1)" in out
    finally:
        supervisor.stop_all(timeout=5)
    assert supervisor.children[0].process.poll() is not None


def _check(env_overrides: dict[str, str], tmp_path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CONSOLE_ENV")}
    env.update({"CONSOLE_ENV": "development", "CONSOLE_VAR_DIR": str(tmp_path), **env_overrides})
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_outside_the_tests_the_console_refuses_to_run_without_postgresql_or_redis(tmp_path):
    missing_db = _check({}, tmp_path)
    assert missing_db.returncode != 0
    assert "DATABASE_URL is not set" in missing_db.stderr and "make run" in missing_db.stderr

    sqlite = _check({"DATABASE_URL": "sqlite:///db.sqlite3", "REDIS_URL": "redis://127.0.0.1:6379/0"}, tmp_path)
    assert sqlite.returncode != 0
    assert "must point at PostgreSQL" in sqlite.stderr

    missing_redis = _check({"DATABASE_URL": "postgres://console@127.0.0.1:5432/console"}, tmp_path)
    assert missing_redis.returncode != 0
    assert "REDIS_URL is not set" in missing_redis.stderr


def test_manage_py_finds_the_servers_make_run_recorded(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "services.env").write_text(
        "DATABASE_URL=postgres://console:pw@127.0.0.1:54329/console\nREDIS_URL=redis://:pw@127.0.0.1:63799/0\n"
    )
    result = _check({}, tmp_path)
    assert result.returncode == 0, result.stderr


def _until(condition, *, watch: ServiceWatch, seconds: float = 60) -> bool:
    """Run the watch (as make run's loop does, without its period) until ``condition`` holds."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        watch.check(force=True)
        reap_orphans(set())
        if condition():
            return True
        time.sleep(0.1)
    return False


def test_a_killed_private_redis_comes_back_by_itself_with_the_queue_it_held(tmp_path, capsys):
    server = EmbeddedRedis(tmp_path / "redis", port=_free_port())
    url = server.start()
    watch = ServiceWatch()
    watch.add("Redis", server)
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=2)
        client.lpush("celery", "a launch's task")
        client.bgrewriteaof()  # on disk now, whatever fsync's second says
        assert _until(lambda: client.info("persistence")["aof_rewrite_in_progress"] == 0, watch=watch)
        killed = server.process
        killed.send_signal(signal.SIGKILL)

        def answers() -> bool:
            try:
                # wall-clock: one probe of a loop that _until repeats until its own generous deadline
                return redis.Redis.from_url(url, socket_connect_timeout=1).ping()
            except redis.ConnectionError:
                return False

        assert _until(lambda: server.process is not killed and answers(), watch=watch)
        assert killed.poll() == -signal.SIGKILL  # reaped: no zombie left behind
        assert redis.Redis.from_url(url).lrange("celery", 0, -1) == [b"a launch's task"]
        watch.check(force=True)
        out = capsys.readouterr().out
        assert "Redis stopped; starting it again" in out and "Redis is back after" in out
    finally:
        server.stop()


def test_a_killed_private_postgresql_comes_back_by_itself_with_its_data(tmp_path, capsys):
    _become_subreaper()  # as make run does: the killed postmaster is ours to reap
    server = EmbeddedPostgres(tmp_path / "postgres", port=_free_port())
    url = server.start()
    watch = ServiceWatch()
    watch.add("PostgreSQL", server)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (note text)")
            conn.execute("INSERT INTO kept VALUES ('before the crash')")
        postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
        os.kill(postmaster, signal.SIGKILL)

        def answers() -> bool:
            try:
                with psycopg.connect(url, connect_timeout=2) as conn:
                    return conn.execute("SELECT note FROM kept").fetchone() == ("before the crash",)
            except psycopg.OperationalError:
                return False

        assert _until(answers, watch=watch, seconds=120)
        assert int((server.data / "postmaster.pid").read_text().split()[0]) != postmaster
        watch.check(force=True)
        out = capsys.readouterr().out
        assert "PostgreSQL stopped; starting it again" in out and "PostgreSQL is back after" in out
    finally:
        server.stop()
