"""Benchmark: the instance list endpoint and page with 10,000 instances in the database.

Creates its own PostgreSQL database (console_bench_list), fills it, measures p50/p99 latency and the
query count of ``GET /api/v1/instances/`` and ``GET /instances/`` at page sizes 10 and 100 through
Django's test client (the whole request path: middleware, auth, view, template or serializer),
drops the database and prints one JSON line.

    .venv/bin/python bench/list.py
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DB_NAME = "console_bench_list"
ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{DB_NAME}"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
os.environ["DJANGO_DEBUG"] = "0"
os.environ["CONSOLE_ENV"] = "bench"
os.environ.setdefault("CONSOLE_VAR_DIR", str(Path(tempfile.gettempdir()) / f"{DB_NAME}-var"))

INSTANCES = int(os.environ.get("BENCH_INSTANCES", "10000"))
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "200"))


def admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(sql)


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q / 100 * (len(values) - 1)))]


def main() -> None:
    admin(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
    admin(f'CREATE DATABASE "{DB_NAME}"')
    try:
        result = run()
    finally:
        from django.db import connections

        connections.close_all()
        admin(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
    print(json.dumps(result))


def run() -> dict:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from accounts.models import User
    from instances.catalogue import catalogue_seed
    from instances.models import GpuModel, Image, Instance, InstanceEvent, Region

    call_command("migrate", verbosity=0)
    catalogue_seed()
    alice = User.objects.create_user(email="alice@example.com", password=None)
    other = User.objects.create_user(email="bob@example.com", password=None)
    regions, gpus, images = list(Region.objects.all()), list(GpuModel.objects.all()), list(Image.objects.all())
    statuses = ["running", "stopped", "running", "failed", "released", "provisioning"]
    now = timezone.now()
    rows = [
        Instance(
            owner=alice if i % 10 else other,
            name=f"bench-{i:05d}",
            region=regions[i % len(regions)],
            gpu_model=gpus[i % len(gpus)],
            gpu_count=(1, 2, 4, 8)[i % 4],
            image=images[i % len(images)],
            disk_gb=50,
            backend_alias="default",
            hourly_price_fen=190,
            status=statuses[i % len(statuses)],
            created_at=now - timezone.timedelta(seconds=i),
        )
        for i in range(INSTANCES)
    ]
    Instance.objects.bulk_create(rows, batch_size=2000)
    InstanceEvent.objects.bulk_create(
        [InstanceEvent(instance=r, old="", new="requested", reason="bench") for r in rows], batch_size=2000
    )
    del rows  # a web worker does not hold the fixture's 20,000 objects: keep them out of the GC's way
    gc.collect()
    gc.freeze()  # as a preloaded server worker would: the imported code is not rescanned by every GC
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    client = Client()
    client.force_login(alice)

    result: dict = {"instances": INSTANCES, "owner_instances": Instance.objects.filter(owner=alice).count()}
    for label, base in (("api", "/api/v1/instances/?page_size="), ("page", "/instances/?page_size=")):
        for size in (10, 100):
            url = f"{base}{size}&page=2"
            for _ in range(10):  # warm up
                assert client.get(url).status_code == 200
            connection.queries_log.clear()  # a full log (maxlen) would make the count read 0
            with CaptureQueriesContext(connection) as ctx:
                client.get(url)
            queries = ctx.final_queries - ctx.initial_queries  # read now: the next request resets the log
            if os.environ.get("BENCH_PROFILE"):
                import cProfile
                import pstats

                profile = cProfile.Profile()
                profile.enable()
                for _ in range(20):
                    client.get(url)
                profile.disable()
                pstats.Stats(profile, stream=sys.stderr).sort_stats("cumulative").print_stats(25)
            timings = []
            for _ in range(REQUESTS):
                start = time.perf_counter()
                response = client.get(url)
                timings.append((time.perf_counter() - start) * 1000)
                assert response.status_code == 200
            result[f"{label}_p50_ms_page{size}"] = round(statistics.median(timings), 2)
            result[f"{label}_p99_ms_page{size}"] = round(percentile(timings, 99), 2)
            result[f"{label}_queries_page{size}"] = queries
    result["requests_per_case"] = REQUESTS
    return result


if __name__ == "__main__":
    main()
