"""Benchmark: the scheduler on a simulated fleet of 1,024 nodes × 8 cards (8,192 cards), in-process.

Creates its own PostgreSQL database (console_bench_sched), migrates it, seeds the catalogue and a
simulated fleet of 1,024 eight-card A800 nodes in 32 network blocks of 32, then measures what
issue #13's table asks, with the console's own code and real database writes:

1. gang placement of 1,024 cards (128 nodes × 8), p50/p99: the reservation alone
   (``_gpus_reserve_nodes``), and the whole launch request (``instance_launch``: quota, balance,
   reservation, the instance row and its timeline), on a fragmented fleet; each rolled back;
2. 10,000 single-node placements including the database writes (each its own committed
   statement), per second; and single-card ``instance_launch`` calls per second (rolled back in
   batches, so no provider is asked);
3. the preemption decision with the fleet full of 1-card interruptible instances (8,192 of them),
   for 1 and 8 cards, p50/p99; and the whole take (the victims moved to PREEMPTING), rolled back;
4. an 8,192-card cluster (1,024 nodes × 8) launched, created at the simulated cloud and running,
   all or nothing (a further launch is then refused and takes no card).

Prints its figures, then one JSON line whose keys carry their units. Drops its database at the end.

    .venv/bin/python bench/scheduler.py
    BENCH_SAMPLES=5 BENCH_PLACEMENTS=500 .venv/bin/python bench/scheduler.py   # a sanity run (QUICK=1)
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DB_NAME = os.environ.get("BENCH_DB_NAME", "console_bench_sched")
# Fewer samples and placements for a sanity run (make bench QUICK=1); the defaults are the figures'.
SAMPLES = int(os.environ.get("BENCH_SAMPLES", "60"))
PLACEMENTS = int(os.environ.get("BENCH_PLACEMENTS", "10000"))
ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
NODES, CARDS, BLOCK_NODES = 1024, 8, 32
FLEET = [{"region": "cn-north-1", "gpu": "a800-80g", "nodes": NODES, "cards": CARDS}]
os.environ.update(
    {
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{DB_NAME}",
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "DJANGO_DEBUG": "0",
        "CONSOLE_ENV": "bench",
        "CELERY_TASK_ALWAYS_EAGER": "1",  # the 8,192-card launch boots in process; the rest rolls back
        "SIMULATED_BOOT_DELAY_S": "0",
        "INSTANCES_DEFAULT_GPU_QUOTA": "10000",
        "INSTANCES_MAX_NODES": "1024",
        "LOG_LEVEL": "ERROR",
        "REDIS_URL": os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/1"),
    }
)


def admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(sql)


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q / 100 * (len(values) - 1)))]


class _Rollback(Exception):
    pass


def rolled_back(fn):
    """Run ``fn`` in a transaction that is rolled back (no on-commit task fires); its duration in ms."""
    from django.db import transaction

    started = time.perf_counter()
    try:
        with transaction.atomic():
            fn()
            elapsed = (time.perf_counter() - started) * 1000
            raise _Rollback
    except _Rollback:
        return elapsed


def main() -> dict:
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    settings.PROVISIONING_BACKENDS = {
        "default": {
            "BACKEND": "providers.simulated.backend.SimulatedBackend",
            "OPTIONS": {"FLEET": FLEET, "BOOT_DELAY_S": 0, "BLOCK_NODES": BLOCK_NODES},
        }
    }
    t = time.perf_counter()
    call_command("migrate", verbosity=0)
    print(f"migrated in {time.perf_counter() - t:.1f} s")
    return measure()


def measure() -> dict:
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.db.models import F

    from billing.models import LedgerAccount, Transaction
    from billing.services import account_get, ledger_post
    from instances.capacity.takeback import gpus_take_by_preempting, preemption_plan
    from instances.catalogue import catalogue_seed
    from instances.errors import NoCapacity
    from instances.models import GpuModel, Image, Instance, Node, Region
    from instances.services import LaunchRequest, instance_launch, nodes_sync
    from instances.services.placement import _gpus_reserve, _gpus_reserve_nodes

    catalogue_seed()
    nodes_sync(alias="default")
    region, a800 = Region.objects.get(slug="cn-north-1"), GpuModel.objects.get(slug="a800-80g")
    image = Image.objects.get(slug="pytorch-2.5-cu124")
    nodes = Node.objects.filter(gpu_model=a800)
    assert nodes.count() == NODES
    user = get_user_model().objects.create_user(email="bench@example.com", password="x" * 12)
    ledger_post(
        key="bench:topup",
        kind=Transaction.Kind.TOPUP,
        user=user,
        legs=[
            (account_get(kind=LedgerAccount.Kind.GATEWAY), -(10**10)),
            (account_get(user=user, kind="cash"), 10**10),
        ],
    )
    out: dict = {"fleet_nodes": NODES, "fleet_cards": NODES * CARDS, "fleet_blocks": NODES // BLOCK_NODES}

    def reset() -> None:
        nodes.update(free_cards=F("total_cards"))

    # 1. Gang placement of 1,024 cards on a fragmented fleet: 40 % of the nodes hold 1-7 cards.
    dice = random.Random(13)
    for node in nodes.only("pk"):
        if dice.random() < 0.4:
            Node.objects.filter(pk=node.pk).update(free_cards=dice.randint(1, 7))
    reserve = [
        rolled_back(lambda: _gpus_reserve_nodes(region=region, gpu_model=a800, count=8, nodes=128))
        for _ in range(SAMPLES)
    ]
    launch = [
        rolled_back(
            lambda: instance_launch(
                LaunchRequest(
                    user=user, region=region, gpu_model=a800, gpu_count=8, image=image, disk_gb=50, node_count=128
                )
            )
        )
        for _ in range(SAMPLES)
    ]
    out |= {
        "gang_1024_cards_reserve_p50_ms": round(statistics.median(reserve), 1),
        "gang_1024_cards_reserve_p99_ms": round(percentile(reserve, 99), 1),
        "gang_1024_cards_launch_p50_ms": round(statistics.median(launch), 1),
        "gang_1024_cards_launch_p99_ms": round(percentile(launch, 99), 1),
    }
    print(
        f"gang of 128 nodes × 8 (1,024 cards), fragmented fleet: reservation p50 {out['gang_1024_cards_reserve_p50_ms']}"
        f" ms, p99 {out['gang_1024_cards_reserve_p99_ms']} ms; whole launch request p50 "
        f"{out['gang_1024_cards_launch_p50_ms']} ms, p99 {out['gang_1024_cards_launch_p99_ms']} ms"
    )

    # 2. 10,000 single-node placements, each its own committed UPDATE (the fleet refilled, untimed, when full).
    reset()
    done, spent = 0, 0.0
    while done < PLACEMENTS:
        started = time.perf_counter()
        batch = min(NODES * CARDS, PLACEMENTS - done)
        for _ in range(batch):
            _gpus_reserve(region=region, gpu_model=a800, count=1)
        spent += time.perf_counter() - started
        done += batch
        reset()
    out["single_placements_per_s"] = round(PLACEMENTS / spent)
    # Placements from 8 connections at once, as several web workers launch (their commits overlap).
    import threading

    from django.db import connections

    threads_n, per_thread = 8, min(1_000, max(1, PLACEMENTS // 10))  # 8,000 at most: within the fleet's 8,192 cards

    def placer() -> None:
        try:
            for _ in range(per_thread):
                _gpus_reserve(region=region, gpu_model=a800, count=1)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=placer) for _ in range(threads_n)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out["single_placements_8_connections_per_s"] = round(threads_n * per_thread / (time.perf_counter() - started))
    reset()
    batch_n = min(100, max(1, PLACEMENTS // 100))
    launches = batch_n * 10
    started = time.perf_counter()
    for _ in range(launches // batch_n):
        try:
            with transaction.atomic():
                for _ in range(batch_n):
                    instance_launch(
                        LaunchRequest(user=user, region=region, gpu_model=a800, gpu_count=1, image=image, disk_gb=50)
                    )
                raise _Rollback
        except _Rollback:
            pass
    out["single_launches_per_s"] = round(launches / (time.perf_counter() - started))
    print(
        f"10,000 single-node placements with their writes: {out['single_placements_per_s']}/s from one connection, "
        f"{out['single_placements_8_connections_per_s']}/s from 8 at once; "
        f"whole single-card launch requests: {out['single_launches_per_s']}/s"
    )

    # 3. The fleet full of 1-card interruptible instances: the preemption decision, and the take.
    spot_user = get_user_model().objects.create_user(email="spot@example.com", password="x" * 12)
    now = __import__("django.utils.timezone", fromlist=["now"]).now()
    rows = [
        Instance(
            owner=spot_user,
            name=f"spot-{n}-{c}",
            region=region,
            gpu_model=a800,
            gpu_count=1,
            image=image,
            disk_gb=50,
            backend_alias="default",
            hourly_price_fen=a800.spot_price_fen,
            tier=Instance.Tier.INTERRUPTIBLE,
            status=Instance.Status.RUNNING,
            node_id=pk,
            running_since=now,
        )
        for pk, n in nodes.values_list("pk", "name")
        for c in range(CARDS)
    ]
    Instance.objects.bulk_create(rows, batch_size=2000)
    nodes.update(free_cards=0)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    decide = {
        n: [
            rolled_back(lambda n=n: preemption_plan(region=region, gpu_model=a800, count=n))
            for _ in range(max(2, SAMPLES * 2 // 3))
        ]
        for n in (1, 8)
    }
    import uuid

    take = [
        rolled_back(
            lambda: gpus_take_by_preempting(
                region=region, gpu_model=a800, count=8, for_instance_id=uuid.uuid4(), no_capacity=NoCapacity("")
            )
        )
        for _ in range(max(2, SAMPLES // 3))
    ]
    out |= {
        "spot_instances": len(rows),
        "preemption_decision_1_card_p50_ms": round(statistics.median(decide[1]), 1),
        "preemption_decision_1_card_p99_ms": round(percentile(decide[1], 99), 1),
        "preemption_decision_8_cards_p50_ms": round(statistics.median(decide[8]), 1),
        "preemption_decision_8_cards_p99_ms": round(percentile(decide[8], 99), 1),
        "preemption_take_8_cards_p99_ms": round(percentile(take, 99), 1),
    }
    print(
        f"preemption decision, fleet full of {len(rows)} interruptible instances: 1 card p99 "
        f"{out['preemption_decision_1_card_p99_ms']} ms, 8 cards (8 victims) p99 "
        f"{out['preemption_decision_8_cards_p99_ms']} ms; decision + 8 victims moved p99 "
        f"{out['preemption_take_8_cards_p99_ms']} ms"
    )
    Instance.objects.filter(owner=spot_user).delete()
    reset()

    # 4. An 8,192-card cluster, launched and booted at the simulated cloud, all or nothing.
    started = time.perf_counter()
    cluster = instance_launch(
        LaunchRequest(user=user, region=region, gpu_model=a800, gpu_count=8, image=image, disk_gb=50, node_count=NODES)
    )
    cluster.refresh_from_db()
    boot_s = time.perf_counter() - started
    placed = cluster.status == Instance.Status.RUNNING and len(set(cluster.node_names)) == NODES
    try:
        instance_launch(
            LaunchRequest(user=user, region=region, gpu_model=a800, gpu_count=8, image=image, disk_gb=50, node_count=2)
        )
        refused = False
    except NoCapacity:
        refused = True
    untouched = not nodes.exclude(free_cards=0).exists()
    out |= {
        "cluster_8192_cards_placed": bool(placed and refused and untouched),
        "cluster_8192_cards_launch_to_running_s": round(boot_s, 2),
    }
    print(
        f"8,192-card cluster (1,024 nodes × 8): {'placed and running' if placed else 'NOT placed'} in {boot_s:.2f} s"
        f" (console and simulated cloud); a further cluster {'refused, no card taken' if refused and untouched else 'NOT refused'}"
    )
    return out


if __name__ == "__main__":
    admin(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
    admin(f'CREATE DATABASE "{DB_NAME}"')
    try:
        result = main()
    finally:
        from django.db import connections

        connections.close_all()
        admin(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
    print(json.dumps(result))
