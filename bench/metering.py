"""Benchmark the settlement tick: 1,000 then 10,000 users with trial credit and an open meter each.

    .venv/bin/python bench/metering.py [--meters 10000] [--ticks 7]

Uses DATABASE_URL (default postgres://postgres@127.0.0.1:5432/console_bench): the database is
created and migrated here and dropped at the end. Prints the seconds and queries of each tick and
ends with one line of JSON whose keys carry their units.

Besides each tick's wall time it reports its CPU: this process's, plus the PostgreSQL backend's when
the server runs on this machine (read from /proc). On a machine that other work keeps busy, wall
time grows with the queue for a core; CPU time much less, so compare those figures there.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlparse, urlunparse

# Django marks an unusable password with a leading "!": bench users never log in.
UNUSABLE = "!"
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/console_bench")
os.environ["DJANGO_SETTINGS_MODULE"] = "console.settings"
os.environ.setdefault("DJANGO_DEBUG", "0")
os.environ.setdefault("LOG_LEVEL", "WARNING")
os.environ.setdefault("EMAIL_BACKEND", "django.core.mail.backends.locmem.EmailBackend")


def _admin_url(url: str) -> tuple[str, str]:
    parts = urlparse(url)
    return urlunparse(parts._replace(path="/postgres")), parts.path.lstrip("/")


def _recreate(url: str, *, drop_only: bool = False) -> None:
    import psycopg

    admin, name = _admin_url(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if not drop_only:
            conn.execute(f'CREATE DATABASE "{name}"')


def _populate(*, start: int, count: int, t0) -> None:
    """``count`` users with a verified address, claimed trial credit and one open GPU meter each.

    Written in bulk (the bench measures the tick, not sign-ups); the trial grants go through
    ``ledger_insert_many`` with the same keys ``trial_claim`` uses.
    """
    from allauth.account.models import EmailAddress
    from django.conf import settings
    from django.db import transaction

    from accounts.models import User
    from billing.models import LedgerAccount, Meter, Sku, Transaction
    from billing.services import Posting, account_get, ledger_insert_many

    Kind = LedgerAccount.Kind
    amount = settings.BILLING_TRIAL_CREDIT_FEN
    sku = Sku.objects.get(code="bench.gpu")
    with transaction.atomic():
        users = User.objects.bulk_create(
            User(email=f"bench{i}@example.com", password=UNUSABLE) for i in range(start, start + count)
        )
        EmailAddress.objects.bulk_create(
            EmailAddress(user=u, email=u.email, primary=True, verified=True) for u in users
        )
        trials = LedgerAccount.objects.bulk_create(LedgerAccount(kind=Kind.TRIAL, owner=u, floor=0) for u in users)
        LedgerAccount.objects.bulk_create(LedgerAccount(kind=Kind.CASH, owner=u, floor=0) for u in users)
        pool = account_get(kind=Kind.TRIAL_POOL)
        ledger_insert_many(
            postings=[
                Posting(
                    key=f"trial:grant:{t.owner_id}",
                    kind=Transaction.Kind.TRIAL_GRANT,
                    legs=((pool.pk, -amount), (t.pk, amount)),
                    user_id=t.owner_id,
                    description="Trial credit",
                    metadata={"expires_at": None},
                )
                for t in trials
            ],
            account_kinds={pool.pk: Kind.TRIAL_POOL, **{t.pk: Kind.TRIAL for t in trials}},
        )
        Meter.objects.bulk_create(
            Meter(
                user=u,
                sku=sku,
                ref=f"bench:{u.pk}",
                description=sku.name,
                quantity=1,
                price_fen=sku.price_fen,
                unit_seconds=sku.unit_seconds,
                started_at=t0,
            )
            for u in users
        )


def _backend_cpu_s() -> float | None:
    """CPU seconds the PostgreSQL backend serving this connection has used, when it runs here."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:  # a server elsewhere (or in a container of its own)
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ticks(*, t0, first: int, ticks: int, interval: int) -> tuple[list[float], list[int], int, list[float]]:
    from django.db import connection

    from billing.settlement import meters_settle_all

    # Queries are counted by an execute wrapper, not Django's CaptureQueriesContext: that one renders
    # every statement with its values for the log (10,000-element arrays quoted client-side), which
    # added 0.1 to 0.25 s to each 10,000-meter tick that the worker never spends.
    executed = []

    def count(execute, sql, params, many, context):
        executed.append(1)
        return execute(sql, params, many, context)

    seconds, queries, charged, cpu = [], [], 0, []
    for k in range(first, first + ticks):
        backend_before = _backend_cpu_s()
        executed.clear()
        with connection.execute_wrapper(count):
            started, cpu_started = time.perf_counter(), time.process_time()
            report = meters_settle_all(now=t0 + timedelta(seconds=interval * k, microseconds=k * 137_911))
            seconds.append(time.perf_counter() - started)
            cpu.append(time.process_time() - cpu_started)
        backend_after = _backend_cpu_s()
        if backend_before is not None and backend_after is not None:
            cpu[-1] += backend_after - backend_before
        queries.append(len(executed))  # statements: BEGIN and COMMIT are not among them
        charged += report.charged_fen
        print(
            f"  tick {k}: {seconds[-1]:.3f} s, {cpu[-1]:.3f} s CPU, {queries[-1]} queries, {report.meters} meters, "
            f"{report.postings} postings, {report.charged_fen} fen"
        )
    return seconds, queries, charged, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--meters", type=int, default=10_000)
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--ticks", type=int, default=7)
    parser.add_argument("--interval", type=int, default=60, help="seconds between ticks")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = parser.parse_args()

    url = os.environ["DATABASE_URL"]
    _recreate(url)
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection
        from django.utils import timezone

        from billing.models import LedgerAccount
        from billing.services import account_get, ledger_check, sku_upsert

        call_command("migrate", verbosity=0)
        sku_upsert(code="bench.gpu", name="RTX 4090", unit="card-hour", price_fen=190, unit_seconds=3600)
        for kind in (LedgerAccount.Kind.REVENUE, LedgerAccount.Kind.TRIAL_REVENUE):
            account_get(kind=kind)  # as after the first tick ever: the bench measures steady state
        t0 = timezone.now() - timedelta(days=1)
        results = {}
        done = 0
        for size in (args.small, args.meters):
            started = time.perf_counter()
            _populate(start=done, count=size - done, t0=t0)
            done = size
            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE")
            print(f"{size} users and open meters ready in {time.perf_counter() - started:.1f} s")
            first = 1 + sum(len(r[0]) for r in results.values())
            results[size] = _ticks(t0=t0, first=first, ticks=args.ticks, interval=args.interval)
        from billing.alerts import balance_alerts_update

        started = time.perf_counter()
        alerts = balance_alerts_update(now=t0 + timedelta(seconds=args.interval * (2 * args.ticks + 1)))
        alerts_s = time.perf_counter() - started
        print(f"balance_alerts_update: {alerts.users_checked} users in {alerts_s:.2f} s ({alerts.warned} warned)")
        started = time.perf_counter()
        check = ledger_check()
        check_s = time.perf_counter() - started
        print(f"ledger_check: {'OK' if check.ok else check.problems} in {check_s:.2f} s")
        small, big = results[args.small], results[args.meters]
        summary = {
            "meters": args.meters,
            "tick_s_median": round(statistics.median(big[0]), 3),
            "tick_s_max": round(max(big[0]), 3),
            "tick_cpu_s_median": round(statistics.median(big[3]), 3),
            "queries_per_tick": max(big[1]),
            f"tick_s_median_{args.small}_meters": round(statistics.median(small[0]), 3),
            f"queries_per_tick_{args.small}_meters": max(small[1]),
            "ticks": len(big[0]),
            "charged_fen_total": small[2] + big[2],
            "alerts_s": round(alerts_s, 3),
            "ledger_check_ok": check.ok,
            "ledger_check_s": round(check_s, 2),
        }
        connection.close()
    finally:
        if not args.keep:
            _recreate(url, drop_only=True)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
