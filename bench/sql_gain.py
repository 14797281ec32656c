"""What each of ``core.sql``'s fixed statements saves a launch, against the ORM query it replaces.

    .venv/bin/python bench/sql_gain.py

In one process, on the launch bench's world (``bench/launch.py``: its catalogue, simulated fleet and
funded API users): first one launch (the API POST and the provision task) is run with every
``core.sql.fetch_one`` counted by its caller, which gives each statement's runs per launch; then each
caller runs with the speed-up on (the fixed statement) and off (its ORM query, ``core.speedups``),
alternately, ``BENCH_SQL_CALLS`` times each, inside a transaction that is rolled back, and their CPU
per call is compared. A statement's gain per launch is (ORM − fixed) × runs per launch, shown as a
share of the CPU of the launch itself (the POST and the task, measured here too). ``core.sql`` keeps a
statement only when that share is at least 5 %.

Measured on a 2-core machine shared with other work (bench/sql_gain.py at 1121f2a, two runs), the
statements ``core.sql`` held then saved: the instance read 12–15 %, the token look-up 5–6 %, the
event insert 4.3–4.5 %, volume mounts 4.2 %, the simulated cloud's machine read and card count 3.3
and 3.4 %, the budget check 2.8 %, the status move 1.2–2.9 %, the reservation check 2.0 %, the node
lock 1.7 %, the meter insert 0.9 % and the instance insert 0.6–0.9 %: all but the first two went back
to the ORM. On 2026-12-04 (``make bench BASE=… ONLY=…,sql_gain``, three runs each side) the token look-up
measured 3.7–4.9 % and went back too. Ends with one line of JSON.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("BENCH_DB_NAME", "console_bench_sql_gain")
os.environ["CELERY_TASK_DEFAULT_QUEUE"] = f"bench-sql-gain-{os.getpid()}"
os.environ["CELERY_WEBHOOKS_QUEUE"] = os.environ["CELERY_MAIL_QUEUE"] = os.environ["CELERY_TASK_DEFAULT_QUEUE"]
os.environ["DATABASE_POOL"] = "0"

from bench import launch as bench

CALLS = int(os.environ.get("BENCH_SQL_CALLS", "300"))
LAUNCHES = int(os.environ.get("BENCH_SQL_LAUNCHES", "40"))
#: Short names for the table of ``make bench`` (bench/run.py).
LABELS = {"instances.services.common._get": "instance_read"}
KEEP_SHARE_PCT = 5.0


class _Rollback(Exception):
    pass


def _cpu_per_call(fn, calls: int) -> float:
    """CPU seconds per call of ``fn``, its writes rolled back."""
    from django.db import transaction

    try:
        with transaction.atomic():
            started = time.process_time()
            for _ in range(calls):
                fn()
            spent = time.process_time() - started
            raise _Rollback
    except _Rollback:
        pass
    return spent / calls


def _count_sql_calls(launch) -> Counter:
    """Run ``launch`` once with each ``core.sql`` entry point counted by its caller's function."""
    from core import sql

    counts: Counter = Counter()
    originals = {"fetch_one": sql.fetch_one}

    def counted(name, original):
        def wrapper(*args, **kwargs):
            caller = sys._getframe(1)
            counts[f"{caller.f_globals['__name__']}.{caller.f_code.co_name}"] += 1
            return original(*args, **kwargs)

        return wrapper

    for name, original in originals.items():
        setattr(sql, name, counted(name, original))
    try:
        launch()
    finally:
        for name, original in originals.items():
            setattr(sql, name, original)
    return counts


def run() -> dict:
    import django

    django.setup()
    from django.conf import settings
    from django.test import Client

    from core import speedups, sql
    from instances.models import Instance
    from instances.services import common as instance_services
    from instances.tasks import instance_provision_task

    combos = bench.world_seed()
    _, raw = bench.api_user("gain@example.com")
    client = Client()
    ids: list[str] = []

    def post(i: int) -> None:
        region, gpu = combos[i % len(combos)]
        response = client.post(
            "/api/v1/instances/",
            {"region": region, "gpu_model": gpu, "gpu_count": 1, "image": "pytorch-2.5-cu124", "name": f"g{i}"},
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {raw}",
        )
        if response.status_code != 201:
            raise RuntimeError(f"launch refused: {response.status_code} {response.content[:200]!r}")
        ids.append(response.json()["id"])

    def launch(i: int) -> None:
        post(i)
        instance_provision_task.run(ids[-1])

    for i in range(5):  # warm up
        launch(i)
    counts = _count_sql_calls(lambda: launch(5))
    started = time.process_time()
    for i in range(6, 6 + LAUNCHES):
        launch(i)
    launch_ms = (time.process_time() - started) * 1000 / LAUNCHES

    instance = Instance.objects.get(pk=ids[-1])

    pairs = {
        # caller (as counted) → the call, made with the speed-up on (fixed) and off (the ORM)
        "instances.services.common._get": lambda: instance_services._get(instance.pk),
    }

    def sql_speedup(on: bool) -> None:
        settings.CONSOLE_SPEEDUPS = {**settings.CONSOLE_SPEEDUPS, "sql": on}
        speedups.decision.cache_clear()
        assert sql.enabled() is on

    figures = {}
    for name, call in pairs.items():
        runs = counts.get(name, 0)
        fixed_s, orm_s = [], []
        for _ in range(3):  # alternating, so a busier moment hurts both
            for on, spent in ((True, fixed_s), (False, orm_s)):
                sql_speedup(on)
                spent.append(_cpu_per_call(call, CALLS))
        sql_speedup(True)
        fixed_us, orm_us = statistics.median(fixed_s) * 1e6, statistics.median(orm_s) * 1e6
        gain_ms = (orm_us - fixed_us) * runs / 1000
        share = 100 * gain_ms / launch_ms
        figures[name] = {
            "runs_per_launch": runs,
            "fixed_us": round(fixed_us),
            "orm_us": round(orm_us),
            "gain_ms_per_launch": round(gain_ms, 3),
            "share_of_launch_pct": round(share, 1),
            "keep": share >= KEEP_SHARE_PCT,
        }
        print(
            f"{name:55} {runs} per launch, fixed {fixed_us:6.0f} µs, ORM {orm_us:6.0f} µs: "
            f"{gain_ms:6.3f} ms per launch, {share:5.1f} % of it"
        )
    uncounted = {k: v for k, v in counts.items() if k not in pairs}
    print(
        f"launch (API POST and provision task, in process): {launch_ms:.1f} ms CPU; other core.sql callers: {uncounted}"
    )
    shares = {f"{LABELS[name]}_share_of_launch_pct": f["share_of_launch_pct"] for name, f in figures.items()}
    return {"launch_cpu_ms": round(launch_ms, 2), **shares, "statements": figures, "uncounted_callers": uncounted}


def main() -> None:
    bench.admin(f'DROP DATABASE IF EXISTS "{bench.DB_NAME}" WITH (FORCE)')
    bench.admin(f'CREATE DATABASE "{bench.DB_NAME}"')
    try:
        result = run()
    finally:
        from django.db import connections

        connections.close_all()
        bench.admin(f'DROP DATABASE IF EXISTS "{bench.DB_NAME}" WITH (FORCE)')
    print(json.dumps(result))


if __name__ == "__main__":
    main()
