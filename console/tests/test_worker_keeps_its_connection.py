"""A Celery worker keeps its database connection between tasks, as a web process between requests:
closed only when older than CONN_MAX_AGE or broken (``console.celery``), not twice per task."""

from __future__ import annotations

from types import SimpleNamespace

import django.db

from console.celery import _close_old_connections, app


def _task(*, eager: bool):
    return SimpleNamespace(request=SimpleNamespace(is_eager=eager))


def test_celerys_own_closing_is_off():
    fixup = next(f for f in app._fixups if type(f).__name__ == "DjangoFixup")
    worker_fixup = fixup.worker_fixup
    assert worker_fixup.db_reuse_max >= 2**31


def test_around_a_task_only_old_or_broken_connections_close(monkeypatch):
    closed = []
    monkeypatch.setattr(django.db, "close_old_connections", lambda: closed.append(True))
    _close_old_connections(sender=_task(eager=False))
    assert closed == [True]


def test_a_task_run_in_process_leaves_the_callers_connection_alone(monkeypatch):
    closed = []
    monkeypatch.setattr(django.db, "close_old_connections", lambda: closed.append(True))
    _close_old_connections(sender=_task(eager=True))
    assert closed == []
