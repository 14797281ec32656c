"""Writing metrics: collect samples from the providers, fold them into rollups, drop the old ones.

Each function is safe to run twice and at once with itself: a sample's key is (instance, tick, card),
so a repeated collection inserts nothing new; a rollup is recomputed from the raw rows of its bucket
and upserted, so a repeat writes the same figures; pruning deletes by age.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from instances.models import Instance
from metrics.models import EPOCH, CardProcesses, CardRollup, CardSample, floor_to
from providers import BackendError, get_backend

logger = logging.getLogger(__name__)


def metrics_collect(*, now: datetime | None = None) -> int:
    """Ask every provider that can sample GPUs for its running instances' cards; store one row per card
    under the current tick. Returns the card samples read (a repeat in the same tick reads them again
    but stores nothing: the rows exist).

    A provider that cannot be reached is skipped this tick (logged): its instances get a gap, which
    idle detection reads as "unknown", not as "idle"."""
    at = floor_to(now or timezone.now(), settings.METRICS_SAMPLE_INTERVAL_S)
    machines: dict[str, list[tuple[str, dict]]] = defaultdict(list)
    running = Instance.objects.filter(status=Instance.Status.RUNNING).values_list(
        "id", "backend_alias", "backend_state"
    )
    for instance_id, alias, state in running.iterator(chunk_size=2000):
        machines[alias].append((str(instance_id), state or {}))
    rows: list[CardSample] = []
    processes: list[CardProcesses] = []
    for alias, batch in sorted(machines.items()):
        try:
            backend = get_backend(alias)
        except Exception:  # an alias no longer configured: the reconciler reports it; nothing to sample
            logger.warning("no backend %r to sample GPUs from", alias, exc_info=True)
            continue
        if not backend.supports_gpu_samples:
            continue
        try:
            samples = backend.gpu_samples(machines=batch, at=at)
        except BackendError as exc:
            logger.warning("GPU samples from %s failed: %s", alias, exc)
            continue
        known = {key for key, _state in batch}
        for key, cards in samples.items():
            if key not in known:
                continue
            rows.extend(
                CardSample(
                    instance_id=key,
                    at=at,
                    card=sample.card,
                    utilization_pct=_clamp(sample.utilization_pct, 0, 100),
                    memory_used_mib=sample.memory_used_mib,
                    memory_total_mib=sample.memory_total_mib,
                    power_w=_clamp(sample.power_w, 0, 32767),
                    temperature_c=_clamp(sample.temperature_c, -273, 32767),
                )
                for sample in cards
            )
            processes.extend(
                CardProcesses(
                    instance_id=key,
                    card=sample.card,
                    at=at,
                    processes=[
                        {"pid": p.pid, "name": p.name, "memory_used_mib": p.memory_used_mib} for p in sample.processes
                    ],
                )
                for sample in cards
                if sample.processes
            )
    CardSample.objects.bulk_create(rows, ignore_conflicts=True, batch_size=5000)
    if processes:
        _processes_keep_newest(processes)
    return len(rows)


_PROCESSES_SQL = """
INSERT INTO metrics_cardprocesses (instance_id, card, at, processes) VALUES (%s, %s, %s, %s)
ON CONFLICT (instance_id, card) DO UPDATE SET at = EXCLUDED.at, processes = EXCLUDED.processes
WHERE metrics_cardprocesses.at < EXCLUDED.at
"""


def _processes_keep_newest(rows: list[CardProcesses]) -> None:
    """Upsert each card's processes unless a newer tick's are stored: a collection that runs late (or
    a backfill, newest first) never puts an older list over a newer one."""
    with connection.cursor() as cursor:
        cursor.executemany(_PROCESSES_SQL, [(str(r.instance_id), r.card, r.at, json.dumps(r.processes)) for r in rows])


def _clamp(value: int | None, low: int, high: int) -> int | None:
    return None if value is None else max(low, min(high, int(value)))


_ROLLUP_SQL = """
INSERT INTO metrics_cardrollup
    (instance_id, at, card, samples, utilization_avg_pct, utilization_max_pct,
     memory_used_max_mib, memory_total_mib, power_avg_w, temperature_max_c)
SELECT instance_id, date_bin(%(step)s, at, %(origin)s) AS bucket, card, count(*),
       round(avg(utilization_pct)), max(utilization_pct), max(memory_used_mib), max(memory_total_mib),
       round(avg(power_w)), max(temperature_c)
FROM metrics_cardsample
WHERE at >= %(start)s AND at < %(end)s
GROUP BY instance_id, bucket, card
ON CONFLICT (instance_id, at, card) DO UPDATE SET
    samples = EXCLUDED.samples,
    utilization_avg_pct = EXCLUDED.utilization_avg_pct,
    utilization_max_pct = EXCLUDED.utilization_max_pct,
    memory_used_max_mib = EXCLUDED.memory_used_max_mib,
    memory_total_mib = EXCLUDED.memory_total_mib,
    power_avg_w = EXCLUDED.power_avg_w,
    temperature_max_c = EXCLUDED.temperature_max_c
"""


def metrics_rollup(*, now: datetime | None = None) -> int:
    """Fold the raw samples of the complete buckets of the last ``METRICS_ROLLUP_LOOKBACK_S`` into
    rollups (recomputed, so samples that arrived late are counted and a repeat changes nothing).
    Returns the rollup rows written."""
    now = now or timezone.now()
    step = settings.METRICS_ROLLUP_S
    end = floor_to(now, step)
    start = floor_to(end - timedelta(seconds=settings.METRICS_ROLLUP_LOOKBACK_S), step)
    with connection.cursor() as cursor:
        cursor.execute(_ROLLUP_SQL, {"step": timedelta(seconds=step), "origin": EPOCH, "start": start, "end": end})
        return cursor.rowcount


def metrics_prune(*, now: datetime | None = None) -> tuple[int, int]:
    """Drop raw samples older than ``METRICS_RAW_RETENTION_S`` and rollups older than
    ``METRICS_ROLLUP_RETENTION_DAYS``; returns how many of each went. Raw samples still inside the
    rollup lookback are kept whatever the setting, so none is dropped before it was folded in."""
    now = now or timezone.now()
    raw_keep = max(settings.METRICS_RAW_RETENTION_S, settings.METRICS_ROLLUP_LOOKBACK_S + settings.METRICS_ROLLUP_S)
    with transaction.atomic():
        raw, _ = CardSample.objects.filter(at__lt=now - timedelta(seconds=raw_keep)).delete()
        CardProcesses.objects.filter(at__lt=now - timedelta(seconds=raw_keep)).delete()
        rollups, _ = CardRollup.objects.filter(
            at__lt=now - timedelta(days=settings.METRICS_ROLLUP_RETENTION_DAYS)
        ).delete()
    return raw, rollups


def metrics_maintain(*, now: datetime | None = None) -> dict[str, int]:
    """The periodic housekeeping: roll up, then prune (in that order, so nothing is pruned unrolled)."""
    rolled = metrics_rollup(now=now)
    raw, rollups = metrics_prune(now=now)
    return {"rolled_up": rolled, "raw_pruned": raw, "rollups_pruned": rollups}


# Idle stretches per instance from the rollups: a bucket is idle when every card's peak stayed below
# the threshold; consecutive idle buckets (a missing bucket, the instance stopped, breaks the run) of
# at least the minimum length count, clipped to the day. The window reaches the minimum length past
# both ends of the day, so a stretch across midnight is measured whole and split between the days.
_IDLE_DAY_SQL = """
INSERT INTO metrics_idleday (instance_id, day, idle_seconds)
SELECT instance_id, %(day)s, sum(extract(epoch FROM least(stretch_end, %(day_end)s) - greatest(stretch_start, %(day_start)s)))::int
FROM (
    SELECT instance_id, min(at) AS stretch_start, max(at) + %(bucket)s AS stretch_end
    FROM (
        SELECT instance_id, at, at - %(bucket)s * row_number() OVER (PARTITION BY instance_id ORDER BY at) AS run
        FROM (
            SELECT instance_id, at
            FROM metrics_cardrollup
            WHERE at >= %(window_start)s AND at < %(window_end)s
            GROUP BY instance_id, at
            HAVING bool_and(utilization_max_pct < %(busy)s)
        ) AS idle_buckets
    ) AS numbered
    GROUP BY instance_id, run
    HAVING count(*) * %(bucket_s)s >= %(min_s)s
) AS stretches
WHERE stretch_end > %(day_start)s AND stretch_start < %(day_end)s
GROUP BY instance_id
ON CONFLICT (instance_id, day) DO UPDATE SET idle_seconds = EXCLUDED.idle_seconds
"""


def metrics_idle_days(*, now: datetime | None = None, days: int = 2) -> int:
    """Record each instance's idle seconds for today so far and the ``days - 1`` days before (in
    ``TIME_ZONE``), recomputed from the rollups and upserted, so repeats agree and a day settles once
    its rollups are complete. Returns the rows written."""
    now = now or timezone.now()
    tz = timezone.get_default_timezone()
    today = timezone.localdate(now, tz)
    minimum = timedelta(minutes=settings.METRICS_IDLE_WASTE_MIN_MINUTES)
    written = 0
    with connection.cursor() as cursor:
        for back in range(days):
            day = today - timedelta(days=back)
            day_start = datetime(day.year, day.month, day.day, tzinfo=tz)
            day_end = day_start + timedelta(days=1)
            cursor.execute(
                _IDLE_DAY_SQL,
                {
                    "day": day,
                    "day_start": day_start,
                    "day_end": day_end,
                    "window_start": day_start - minimum,
                    "window_end": day_end + minimum,
                    "bucket": timedelta(seconds=settings.METRICS_ROLLUP_S),
                    "bucket_s": settings.METRICS_ROLLUP_S,
                    "min_s": int(minimum.total_seconds()),
                    "busy": settings.METRICS_IDLE_BELOW_PCT,
                },
            )
            written += cursor.rowcount
    return written
