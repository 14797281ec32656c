"""Profile of the launch's hot path in one process: the API POST (through Django's middleware, as a
request) and the provision task's body, each 200 times, with their SQL statements counted.

No server and no worker: what this measures is the console's own Python per launch (``bench/launch.py``
measures the whole path with uvicorn and Celery). ``--profile`` adds cProfile's top functions by
cumulative time, to see where the time goes.

    .venv/bin/python bench/launch_profile.py [--profile]
"""

from __future__ import annotations

import cProfile
import json
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("BENCH_DB_NAME", "console_bench_launch_profile")
os.environ["CELERY_TASK_DEFAULT_QUEUE"] = f"bench-launch-profile-{os.getpid()}"
os.environ["CELERY_WEBHOOKS_QUEUE"] = os.environ["CELERY_MAIL_QUEUE"] = os.environ["CELERY_TASK_DEFAULT_QUEUE"]
# One connection for the whole run, as a test does: the pool would hand each request another one.
os.environ["DATABASE_POOL"] = "0"

from bench import launch as bench  # sets the environment the console reads

N = int(os.environ.get("BENCH_LAUNCHES", "200"))


def _print(profiler: cProfile.Profile) -> None:
    """The profile's top functions: ``BENCH_PROFILE_SORT`` (cumulative, tottime…), ``BENCH_PROFILE_TOP`` of them."""
    stats = pstats.Stats(profiler).sort_stats(os.environ.get("BENCH_PROFILE_SORT", "cumulative"))
    stats.print_stats(int(os.environ.get("BENCH_PROFILE_TOP", "30")))


def main() -> None:
    bench.admin(f'DROP DATABASE IF EXISTS "{bench.DB_NAME}" WITH (FORCE)')
    bench.admin(f'CREATE DATABASE "{bench.DB_NAME}"')
    try:
        result = run(profile="--profile" in sys.argv)
    finally:
        from django.db import connections

        connections.close_all()
        bench.admin(f'DROP DATABASE IF EXISTS "{bench.DB_NAME}" WITH (FORCE)')
        import redis

        redis.Redis.from_url(bench.REDIS_URL).delete(os.environ["CELERY_TASK_DEFAULT_QUEUE"])
    print(json.dumps(result))


def run(*, profile: bool) -> dict:
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection, reset_queries
    from django.test import Client

    from instances.tasks import instance_provision_task

    combos = bench.world_seed()
    tokens = [bench.api_user(f"profile{n}@example.com")[1] for n in range(20)]
    client = Client()
    ids: list[str] = []

    def post(i: int) -> None:
        region, gpu = combos[i % len(combos)]
        response = client.post(
            "/api/v1/instances/",
            {"region": region, "gpu_model": gpu, "gpu_count": 1, "image": "pytorch-2.5-cu124", "name": f"p{i}"},
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {tokens[i % len(tokens)]}",
        )
        if response.status_code != 201:
            raise RuntimeError(f"launch refused: {response.status_code} {response.content[:200]!r}")
        ids.append(response.json()["id"])

    for i in range(len(tokens)):  # warm up: imports, each token's first use, the process's copies
        post(i)
    for instance_id in ids:
        instance_provision_task.run(instance_id)
    ids.clear()
    settings.DEBUG = True  # Django logs each statement of a connection while DEBUG is on
    reset_queries()
    post(N)
    post_queries = list(connection.queries)
    reset_queries()
    instance_provision_task.run(ids.pop())
    provision_queries = list(connection.queries)
    settings.DEBUG = False

    profiler = cProfile.Profile() if profile else None
    started = time.process_time()
    if profiler:
        profiler.enable()
    for i in range(N):
        post(i)
    if profiler:
        profiler.disable()
        _print(profiler)
    web_ms = (time.process_time() - started) * 1000 / N

    profiler = cProfile.Profile() if profile else None
    started = time.process_time()
    if profiler:
        profiler.enable()
    for instance_id in ids:
        instance_provision_task.run(instance_id)
    if profiler:
        profiler.disable()
        _print(profiler)
    worker_ms = (time.process_time() - started) * 1000 / len(ids)

    print(f"API POST: {len(post_queries)} statements, {web_ms:.1f} ms CPU each")
    print(f"provision task: {len(provision_queries)} statements, {worker_ms:.1f} ms CPU each")
    return {
        "post_queries": len(post_queries),
        "provision_queries": len(provision_queries),
        "post_cpu_ms": round(web_ms, 1),
        "provision_cpu_ms": round(worker_ms, 1),
        "profiled": profile,
    }


if __name__ == "__main__":
    main()
