"""Benchmark: a day of GPU samples for 10,000 running instances, every 15 s: storage and chart reads.

Creates its own PostgreSQL database (console_bench_metrics) with the metrics app's tables (its
migration), and fills them as the worker would over a day: one row per card per tick, written tick
after tick (each statement one hour of ticks for every instance), with idle stretches. Then it
measures, on that day:

- storage: the raw table and its one index (the primary key) per day, per instance and per row;
- ingest: one tick for every instance through the worker's own path (``CardSample`` bulk insert);
- housekeeping: one ``metrics_rollup`` run (its 30-minute lookback) and one 5-minute prune slice;
- reads: ``metrics.selectors.instance_series`` (what the chart API answers) for random instances,
  for 1 hour and 1 day (raw rows) and 7 days (rollups; six earlier days of rollups are filled too),
  and ``gpu_use_for`` for a list page of 25 instances.

It prints the figures, drops the database and ends with one JSON line whose keys carry their units.

    .venv/bin/python bench/metrics.py                      # 10,000 instances, one card each
    BENCH_INSTANCES=1000 BENCH_CARDS=8 .venv/bin/python bench/metrics.py
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DB_NAME = os.environ.get("BENCH_DB_NAME", "console_bench_metrics")
ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
INSTANCES = int(os.environ.get("BENCH_INSTANCES", "10000"))
CARDS = int(os.environ.get("BENCH_CARDS", "1"))
QUERIES = int(os.environ.get("BENCH_QUERIES", "30"))
KEEP = os.environ.get("BENCH_KEEP_DB") == "1"
INTERVAL_S = 15
TICKS_PER_DAY = 86400 // INTERVAL_S
DAY_END = datetime(2026, 11, 30, tzinfo=UTC) + timedelta(days=1)  # the day measured ends here
DAY_START = DAY_END - timedelta(days=1)

os.environ.update(
    {
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{DB_NAME}",
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "REDIS_URL": os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/2"),  # settings insist; unused here
        "CONSOLE_ENV": "bench",
        "DJANGO_DEBUG": "0",
        "LOG_LEVEL": "WARNING",
    }
)


def admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(sql)


# One hour of ticks for every instance and card, tick-major (as the worker writes them). The series is
# deterministic: a 20-minute stretch in four is idle (0-2 %), the rest busy at 50-95 %.
FILL_SQL = """
INSERT INTO metrics_cardsample
    (at, instance_id, memory_used_mib, memory_total_mib, card, utilization_pct, power_w, temperature_c)
SELECT %(start)s::timestamptz + make_interval(secs => t * 15),
       md5(i::text)::uuid,
       CASE WHEN idle THEN 2048 ELSE 40000 + (i * 7919 + c * 104729) %% 90000 END,
       143771,
       c,
       CASE WHEN idle THEN t %% 3 ELSE 50 + (i * 31 + t * 17 + c * 13) %% 46 END,
       CASE WHEN idle THEN 75 ELSE 300 + (i * 31 + t * 17) %% 380 END,
       CASE WHEN idle THEN 31 ELSE 55 + (i + t) %% 25 END
FROM generate_series(0, %(ticks)s - 1) AS t
CROSS JOIN generate_series(1, %(instances)s) AS i
CROSS JOIN generate_series(0, %(cards)s - 1) AS c
CROSS JOIN LATERAL (SELECT ((i * 2654435761 + (%(offset)s + t) / 80) %% 4) = 0 AS idle) AS s
"""

# Six earlier days of 5-minute rollups (what a week's chart reads), for every instance and card.
WEEK_SQL = """
INSERT INTO metrics_cardrollup
    (at, instance_id, memory_used_max_mib, memory_total_mib, card, samples, utilization_avg_pct,
     utilization_max_pct, power_avg_w, temperature_max_c)
SELECT %(start)s::timestamptz + make_interval(secs => b * 300), md5(i::text)::uuid, 90000, 143771, c, 20,
       (i * 31 + b * 17) %% 96, 100, 400, 75
FROM generate_series(0, %(buckets)s - 1) AS b
CROSS JOIN generate_series(1, %(instances)s) AS i
CROSS JOIN generate_series(0, %(cards)s - 1) AS c
"""


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def _timed(fn, *args, **kwargs) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - started, result


def main() -> dict:
    admin(f'DROP DATABASE IF EXISTS "{DB_NAME}"')
    admin(f'CREATE DATABASE "{DB_NAME}"')
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from metrics.models import CardSample
    from metrics.selectors import gpu_use_for, instance_series
    from metrics.services import metrics_prune, metrics_rollup

    try:
        call_command("migrate", "metrics", verbosity=0)
        rows_per_tick = INSTANCES * CARDS
        print(
            f"filling one day: {INSTANCES} instances × {CARDS} card(s) × {TICKS_PER_DAY} ticks = {rows_per_tick * TICKS_PER_DAY:,} rows"
        )
        fill_started = time.perf_counter()
        with connection.cursor() as cursor:
            for hour in range(24):
                cursor.execute(
                    FILL_SQL,
                    {
                        "start": DAY_START + timedelta(hours=hour),
                        "ticks": 240,
                        "instances": INSTANCES,
                        "cards": CARDS,
                        "offset": hour * 240,
                    },
                )
                print(f"  hour {hour + 1:2d}/24 written ({time.perf_counter() - fill_started:.0f} s)", flush=True)
        fill_s = time.perf_counter() - fill_started
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE metrics_cardsample")
            cursor.execute(
                "SELECT count(*), pg_relation_size('metrics_cardsample'), pg_indexes_size('metrics_cardsample'),"
                " pg_total_relation_size('metrics_cardsample') FROM metrics_cardsample"
            )
            raw_rows, raw_heap, raw_index, raw_total = cursor.fetchone()

        # The worker's ingest of one tick (the next one after the day), through its own insert.
        tick_at = DAY_END
        ids = [
            uuid.UUID(hashlib.md5(str(i).encode(), usedforsecurity=False).hexdigest()) for i in range(1, INSTANCES + 1)
        ]  # md5(i)::uuid
        rows = [
            CardSample(
                instance_id=i,
                at=tick_at,
                card=c,
                utilization_pct=50,
                memory_used_mib=1000,
                memory_total_mib=143771,
                power_w=300,
                temperature_c=60,
            )
            for i in ids
            for c in range(CARDS)
        ]
        ingest_s, _ = _timed(CardSample.objects.bulk_create, rows, ignore_conflicts=True, batch_size=5000)

        # Rollups of the whole day, as 48 periodic runs would have written them; one run timed.
        rollup_runs = []
        for half_hour in range(1, 49):
            seconds, _ = _timed(metrics_rollup, now=DAY_START + timedelta(minutes=30 * half_hour))
            rollup_runs.append(seconds)
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE metrics_cardrollup")
            cursor.execute("SELECT count(*), pg_total_relation_size('metrics_cardrollup') FROM metrics_cardrollup")
            rollup_rows, rollup_total = cursor.fetchone()
            week_started = time.perf_counter()
            cursor.execute(
                WEEK_SQL,
                {"start": DAY_START - timedelta(days=6), "buckets": 6 * 288, "instances": INSTANCES, "cards": CARDS},
            )
            cursor.execute("VACUUM ANALYZE metrics_cardrollup")
            week_fill_s = time.perf_counter() - week_started

        # Reads: the chart API's selector for random instances (a page's first load and its refreshes).
        rng = random.Random(7)
        now = DAY_END - timedelta(seconds=1)
        reads: dict[str, list[float]] = {}
        for range_key in ("1h", "1d", "7d"):
            times = []
            for _ in range(QUERIES):
                instance = ids[rng.randrange(INSTANCES)]
                seconds, series = _timed(instance_series, instance_id=instance, range_key=range_key, now=now)
                assert len(series["cards"]) == CARDS, series["cards"]
                times.append(seconds)
            reads[range_key] = times
        list_times = []
        for _ in range(QUERIES):
            page = rng.sample(ids, 25)
            seconds, _uses = _timed(gpu_use_for, page, now=now)
            list_times.append(seconds)

        # One 5-minute slice of raw rows past retention, as the periodic prune drops it.
        from django.test import override_settings

        with override_settings(METRICS_RAW_RETENTION_S=86400 - 300, METRICS_ROLLUP_LOOKBACK_S=60):
            prune_s, (pruned, _) = _timed(metrics_prune, now=DAY_END)

        def pct(values: list[float], q: float) -> float:
            ordered = sorted(values)
            return _ms(ordered[min(len(ordered) - 1, int(q * len(ordered)))])

        from django.conf import settings

        held = (
            raw_total * settings.METRICS_RAW_RETENTION_S / 86400 + rollup_total * settings.METRICS_ROLLUP_RETENTION_DAYS
        )
        result = {
            "instances": INSTANCES,
            "cards_per_instance": CARDS,
            "sample_interval_s": INTERVAL_S,
            "raw_rows_per_day": raw_rows,
            "raw_table_bytes_per_day": raw_heap,
            "raw_index_bytes_per_day": raw_index,
            "raw_total_bytes_per_day": raw_total,
            "raw_total_bytes_per_row": round(raw_total / raw_rows, 1),
            "raw_total_mib_per_instance_day": round(raw_total / INSTANCES / 2**20, 3),
            "rollup_rows_per_day": rollup_rows,
            "rollup_total_bytes_per_day": rollup_total,
            # What the two retention settings keep on disk at steady state (raw hours + rollup days).
            "held_bytes_at_retention": int(held),
            "fill_day_s": round(fill_s, 1),
            "week_rollups_fill_s": round(week_fill_s, 1),
            "ingest_one_tick_ms": _ms(ingest_s),
            "rollup_run_median_ms": _ms(statistics.median(rollup_runs)),
            "rollup_run_max_ms": _ms(max(rollup_runs)),
            "prune_5min_slice_ms": _ms(prune_s),
            "prune_5min_slice_rows": pruned,
            "chart_1h_p50_ms": pct(reads["1h"], 0.5),
            "chart_1h_max_ms": pct(reads["1h"], 1.0),
            "chart_1d_p50_ms": pct(reads["1d"], 0.5),
            "chart_1d_p95_ms": pct(reads["1d"], 0.95),
            "chart_1d_max_ms": pct(reads["1d"], 1.0),
            "chart_7d_p50_ms": pct(reads["7d"], 0.5),
            "chart_7d_max_ms": pct(reads["7d"], 1.0),
            "list_25_instances_p50_ms": pct(list_times, 0.5),
            "list_25_instances_max_ms": pct(list_times, 1.0),
        }
    finally:
        from django.db import connections

        connections.close_all()
        if not KEEP:
            # FORCE: autovacuum may still be at work on the day's rows (and the connection pool's
            # sessions linger), which a plain DROP refuses, losing the figures measured above.
            admin(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')

    print()
    print(
        f"raw samples, one day: {result['raw_rows_per_day']:,} rows, "
        f"{result['raw_total_bytes_per_day'] / 2**30:.2f} GiB ({result['raw_table_bytes_per_day'] / 2**30:.2f} GiB table "
        f"+ {result['raw_index_bytes_per_day'] / 2**30:.2f} GiB index), {result['raw_total_bytes_per_row']} B/row, "
        f"{result['raw_total_mib_per_instance_day']} MiB per instance-day"
    )
    print(
        f"rollups, one day: {result['rollup_rows_per_day']:,} rows, {result['rollup_total_bytes_per_day'] / 2**20:.0f} MiB"
    )
    print(
        f"ingest of one tick ({INSTANCES * CARDS:,} rows): {result['ingest_one_tick_ms']} ms; "
        f"rollup run: median {result['rollup_run_median_ms']} ms, max {result['rollup_run_max_ms']} ms; "
        f"prune of a 5-minute slice ({result['prune_5min_slice_rows']:,} rows): {result['prune_5min_slice_ms']} ms"
    )
    print(
        f"chart of one instance: 1 h p50 {result['chart_1h_p50_ms']} ms; 1 day p50 {result['chart_1d_p50_ms']} ms, "
        f"p95 {result['chart_1d_p95_ms']} ms, max {result['chart_1d_max_ms']} ms (goal < 100 ms); "
        f"7 days p50 {result['chart_7d_p50_ms']} ms"
    )
    print(f"list page of 25: p50 {result['list_25_instances_p50_ms']} ms, max {result['list_25_instances_max_ms']} ms")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
