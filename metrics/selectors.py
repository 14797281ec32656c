"""Reading metrics for pages and the API: one instance's chart series, and the list's utilisation.

Every read is one SQL statement on a primary-key range (instance, time), so a chart costs the same
however many instances the console samples (``bench/metrics.py`` measures it). Nothing here asks a
provider; callers scope the instance to its owner first (``instances.selectors.instance_get_for``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Sum
from django.utils import timezone
from django.utils.translation import gettext

from instances.models import Instance
from metrics.models import EPOCH, CardProcesses, IdleDay, floor_to

# The chart ranges: key -> (seconds shown, seconds per point). About 60-360 points per chart.
RANGES: dict[str, tuple[int, int]] = {
    "15m": (15 * 60, 15),
    "1h": (60 * 60, 15),
    "6h": (6 * 3600, 60),
    "1d": (24 * 3600, 300),
    "7d": (7 * 24 * 3600, 1800),
}
DEFAULT_RANGE = "1h"
# Named in the API schema (SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"], metrics' block in settings).
RANGE_CHOICES = [(key, key) for key in RANGES]
SERIES = ("utilization_pct", "memory_used_mib", "power_w", "temperature_c")

_RAW_SQL = """
SELECT card, date_bin(%(step)s, at, %(origin)s) AS bucket, round(avg(utilization_pct)), max(memory_used_mib),
       max(memory_total_mib), round(avg(power_w)), max(temperature_c)
FROM metrics_cardsample
WHERE instance_id = %(instance)s AND at >= %(start)s AND at < %(end)s
GROUP BY card, bucket ORDER BY card, bucket
"""
# Rollups up to ``tail``, the raw samples after it (the buckets the periodic rollup may not have reached
# yet), weighted by the samples each row stands for.
_ROLLUP_SQL = """
SELECT card, date_bin(%(step)s, at, %(origin)s) AS bucket,
       round(sum(util * weight)::numeric / nullif(sum(weight) FILTER (WHERE util IS NOT NULL), 0)),
       max(memory_used), max(memory_total),
       round(sum(power * weight)::numeric / nullif(sum(weight) FILTER (WHERE power IS NOT NULL), 0)),
       max(temperature)
FROM (
    SELECT card, at, utilization_avg_pct AS util, samples AS weight, memory_used_max_mib AS memory_used,
           memory_total_mib AS memory_total, power_avg_w AS power, temperature_max_c AS temperature
    FROM metrics_cardrollup
    WHERE instance_id = %(instance)s AND at >= %(start)s AND at < %(tail)s
    UNION ALL
    SELECT card, at, utilization_pct, 1, memory_used_mib, memory_total_mib, power_w, temperature_c
    FROM metrics_cardsample
    WHERE instance_id = %(instance)s AND at >= %(tail)s AND at < %(end)s
) AS points
GROUP BY card, bucket ORDER BY card, bucket
"""


def series_source(range_key: str) -> str:
    """Which table a range reads: the raw samples for ranges shorter than a rollup bucket's worth of
    points (15 min to 6 h, while they are all still kept), else the rollups (a day at 5 minutes a
    point is exactly the rollup buckets: reading 288 rows instead of 5,760 keeps a day's chart fast)."""
    seconds, step = RANGES[range_key]
    if seconds <= settings.METRICS_RAW_RETENTION_S and step < settings.METRICS_ROLLUP_S:
        return "raw"
    return "rollup"


def instance_series(*, instance_id: uuid.UUID | str, range_key: str, now: datetime | None = None) -> dict:
    """The chart data of one instance over ``range_key``: a shared time axis ``t`` (UNIX seconds, one
    point per step, the last one the bucket in progress) and per card its four series, aligned to
    ``t`` with None where nothing was sampled (the instance was stopped, or its provider silent)."""
    seconds, step = RANGES[range_key]
    now = now or timezone.now()
    end = floor_to(now, step) + timedelta(seconds=step)
    start = end - timedelta(seconds=seconds)
    source = series_source(range_key)
    # The raw tail of a rollup read: the bucket in progress and the one before it, which the periodic
    # rollup (every METRICS_ROLLUP_S, at any phase) may not have written yet.
    tail = max(start, floor_to(now, settings.METRICS_ROLLUP_S) - timedelta(seconds=settings.METRICS_ROLLUP_S))
    with connection.cursor() as cursor:
        cursor.execute(
            _RAW_SQL if source == "raw" else _ROLLUP_SQL,
            {
                "step": timedelta(seconds=step),
                "origin": EPOCH,
                "instance": str(instance_id),
                "start": start,
                "end": end,
                "tail": tail,
            },
        )
        rows = cursor.fetchall()
    points = seconds // step
    axis = [int(start.timestamp()) + i * step for i in range(points)]
    cards: dict[int, dict] = {}
    for card, bucket, util, memory_used, memory_total, power, temperature in rows:
        index = int((bucket - start).total_seconds()) // step
        if not 0 <= index < points:
            continue
        entry = cards.setdefault(card, {"card": card, "memory_total_mib": None, **{k: [None] * points for k in SERIES}})
        for name, value in zip(SERIES, (util, memory_used, power, temperature), strict=True):
            entry[name][index] = None if value is None else int(value)
        if memory_total is not None:
            entry["memory_total_mib"] = int(memory_total)
    return {
        "range": range_key,
        "step_s": step,
        "source": source,
        "start": start,
        "end": end,
        "t": axis,
        "cards": [cards[card] for card in sorted(cards)],
        "processes": instance_processes(instance_id=instance_id, now=now),
    }


def instance_processes(*, instance_id: uuid.UUID | str, now: datetime | None = None) -> list[dict]:
    """The processes on the instance's cards now (card order, then pid): those of the last tick that
    listed any, if recent; none when the provider lists none (DCGM, simulated-only hosts) or went silent."""
    now = now or timezone.now()
    fresh = now - timedelta(seconds=settings.METRICS_IDLE_STALE_S)
    rows = CardProcesses.objects.filter(instance_id=instance_id, at__gte=fresh).order_by("card")
    return [
        {"card": row.card, **process}
        for row in rows
        for process in sorted(row.processes, key=lambda p: p.get("pid") or 0)
    ]


@dataclass(frozen=True)
class GpuUse:
    """The list's figure for one instance: the average utilisation of its cards over the last buckets."""

    now_pct: int | None  # the latest bucket's average, None when nothing was sampled lately
    points: tuple[int | None, ...]  # the last hour, oldest first

    @property
    def sparkline(self) -> str:
        """The points as an SVG polyline's ``points`` (60 × 16 box, 100 % at the top); gaps are skipped."""
        width, height = 60, 16
        step = width / max(1, len(self.points) - 1)
        return " ".join(
            f"{i * step:.1f},{height - value * height / 100:.1f}"
            for i, value in enumerate(self.points)
            if value is not None
        )


_USE_SQL = """
SELECT instance_id, date_bin(%(step)s, at, %(origin)s) AS bucket, round(avg(utilization_pct))
FROM metrics_cardsample
WHERE instance_id = ANY(%(instances)s) AND at >= %(start)s AND at < %(end)s
GROUP BY instance_id, bucket
"""
USE_BUCKET_S = 300
USE_POINTS = 12


def gpu_use_for(instance_ids: Iterable[uuid.UUID], *, now: datetime | None = None) -> dict[uuid.UUID, GpuUse]:
    """For each instance (already scoped to the reader), its utilisation over the last hour in 5-minute
    buckets: one statement for the whole list. Instances with no sample in the hour are left out."""
    ids = [uuid.UUID(str(i)) for i in instance_ids]
    if not ids:
        return {}
    now = now or timezone.now()
    end = floor_to(now, USE_BUCKET_S) + timedelta(seconds=USE_BUCKET_S)
    start = end - timedelta(seconds=USE_BUCKET_S * USE_POINTS)
    with connection.cursor() as cursor:
        cursor.execute(
            _USE_SQL,
            {"step": timedelta(seconds=USE_BUCKET_S), "origin": EPOCH, "instances": ids, "start": start, "end": end},
        )
        rows = cursor.fetchall()
    points: dict[uuid.UUID, list[int | None]] = {}
    for instance_id, bucket, util in rows:
        index = int((bucket - start).total_seconds()) // USE_BUCKET_S
        if 0 <= index < USE_POINTS:
            points.setdefault(instance_id, [None] * USE_POINTS)[index] = None if util is None else int(util)
    uses = {}
    for instance_id, values in points.items():
        recent = [v for v in values[-2:] if v is not None]  # the bucket in progress may have just begun
        uses[instance_id] = GpuUse(now_pct=recent[-1] if recent else None, points=tuple(values))
    return uses


_IDLE_RAW_SQL = """
SELECT instance_id, max(at) FILTER (WHERE utilization_pct >= %(busy)s), min(at), max(at)
FROM metrics_cardsample
WHERE instance_id = ANY(%(instances)s) AND at >= %(since)s AND utilization_pct IS NOT NULL
GROUP BY instance_id
"""
_IDLE_ROLLUP_SQL = """
SELECT instance_id, max(at) FILTER (WHERE utilization_max_pct >= %(busy)s), min(at)
FROM metrics_cardrollup
WHERE instance_id = ANY(%(instances)s) AND at >= %(since)s AND at < %(until)s AND utilization_max_pct IS NOT NULL
GROUP BY instance_id
"""


def gpu_idle_seconds(*, running_since: dict[uuid.UUID, datetime | None], now: datetime | None = None) -> dict:
    """For each instance (id -> when it last booted), how long every one of its cards has been below
    ``METRICS_IDLE_BELOW_PCT`` utilisation, judged from the stored samples (raw, then the rollups'
    peaks further back). An instance is left out, unknown rather than idle, when it has no recent
    sample (``METRICS_IDLE_STALE_S``: its provider went silent) or its utilisation cannot be read.
    The idle clock never starts before the boot: a restart is a use. Two statements for all."""
    ids = [uuid.UUID(str(i)) for i in running_since]
    if not ids:
        return {}
    now = now or timezone.now()
    busy = settings.METRICS_IDLE_BELOW_PCT
    raw_since = now - timedelta(seconds=settings.METRICS_RAW_RETENTION_S)
    with connection.cursor() as cursor:
        cursor.execute(_IDLE_RAW_SQL, {"busy": busy, "instances": ids, "since": raw_since})
        raw = {row[0]: row[1:] for row in cursor.fetchall()}
        cursor.execute(
            _IDLE_ROLLUP_SQL,
            {
                "busy": busy,
                "instances": list(raw),
                "since": now - timedelta(days=settings.METRICS_ROLLUP_RETENTION_DAYS),
                "until": raw_since,
            },
        )
        older = {row[0]: row[1:] for row in cursor.fetchall()}
    stale = now - timedelta(seconds=settings.METRICS_IDLE_STALE_S)
    idle: dict[uuid.UUID, int] = {}
    for instance_id, (last_busy, first_seen, last_seen) in raw.items():
        if last_seen < stale:
            continue
        if last_busy is None and instance_id in older:
            rollup_busy, rollup_first = older[instance_id]
            # A busy bucket was busy up to its end, at most; its start is the first sample it holds.
            last_busy = rollup_busy + timedelta(seconds=settings.METRICS_ROLLUP_S) if rollup_busy else None
            first_seen = min(first_seen, rollup_first)
        since = last_busy or first_seen
        booted = running_since.get(instance_id)
        if booted is not None:
            since = max(since, booted)
        idle[instance_id] = max(0, int((now - since).total_seconds()))
    return idle


@dataclass(frozen=True)
class IdleWasteLine:
    """One instance's idle time in a statement's month and what it cost at the instance's hourly price."""

    name: str
    ref: str
    idle_seconds: int
    hourly_price_fen: int

    @property
    def amount_fen(self) -> int:
        return round(self.hourly_price_fen * self.idle_seconds / 3600)

    @property
    def rule(self) -> str:
        """What counted as idle, for the statement to say."""
        return gettext(
            "Part of the usage above: the time every card of an instance stayed below %(pct)d %% utilisation "
            "for %(m)d minutes or more, at the instance's hourly price. Auto-stop on an instance's page stops "
            "it when idle (its disk is kept)."
        ) % {"pct": settings.METRICS_IDLE_BELOW_PCT, "m": settings.METRICS_IDLE_WASTE_MIN_MINUTES}


def idle_waste_for(*, user, start: datetime, end: datetime) -> list[IdleWasteLine]:
    """The statement's idle-waste lines: per instance of ``user`` with idle stretches (of at least
    ``METRICS_IDLE_WASTE_MIN_MINUTES``) in ``[start, end)``, most costly first. Two queries."""
    tz = timezone.get_default_timezone()
    days = (
        IdleDay.objects.filter(
            day__gte=timezone.localdate(start, tz),
            day__lt=timezone.localdate(end, tz),
            instance_id__in=Instance.objects.filter(owner=user).values("pk"),
        )
        .values("instance_id")
        .annotate(seconds=Sum("idle_seconds"))
        .order_by()
    )
    seconds = {row["instance_id"]: row["seconds"] for row in days if row["seconds"]}
    instances = Instance.objects.filter(pk__in=list(seconds)).only("pk", "name", "hourly_price_fen")
    lines = [
        IdleWasteLine(name=i.name, ref=str(i.pk), idle_seconds=seconds[i.pk], hourly_price_fen=i.hourly_price_fen)
        for i in instances
    ]
    return sorted(lines, key=lambda line: (-line.amount_fen, line.name))


_FLEET_NOW_SQL = """
SELECT i.gpu_model_id, i.node_id, round(avg(s.utilization_pct))
FROM metrics_cardsample s JOIN instances_instance i ON i.id = s.instance_id
WHERE s.at >= %(since)s AND s.utilization_pct IS NOT NULL
GROUP BY GROUPING SETS ((i.gpu_model_id), (i.node_id))
"""
_FLEET_TREND_SQL = """
SELECT i.gpu_model_id, date_bin(%(step)s, r.at, %(origin)s) AS day,
       round(sum(r.utilization_avg_pct * r.samples)::numeric / nullif(sum(r.samples), 0))
FROM metrics_cardrollup r JOIN instances_instance i ON i.id = r.instance_id
WHERE r.at >= %(since)s AND r.utilization_avg_pct IS NOT NULL
GROUP BY i.gpu_model_id, day
"""
FLEET_TREND_DAYS = 7


def fleet_use(*, now: datetime | None = None) -> dict:
    """For the staff fleet page: real GPU utilisation (the average of every sampled card of running
    instances over the last 5 minutes) per GPU model and per node (an instance counts on its head
    node), and per GPU model a 7-day trend of daily averages from the rollups. Two statements."""
    now = now or timezone.now()
    day = timedelta(days=1)
    start = floor_to(now, 86400) + day - FLEET_TREND_DAYS * day
    with connection.cursor() as cursor:
        cursor.execute(_FLEET_NOW_SQL, {"since": now - timedelta(minutes=5)})
        current = cursor.fetchall()
        cursor.execute(_FLEET_TREND_SQL, {"step": day, "origin": EPOCH, "since": start})
        trend = cursor.fetchall()
    models: dict[int, dict] = {}
    nodes: dict[int, int] = {}
    for gpu_model_id, node_id, util in current:
        if gpu_model_id is not None:
            models.setdefault(gpu_model_id, {})["now_pct"] = int(util)
        elif node_id is not None:
            nodes[node_id] = int(util)
    for gpu_model_id, bucket, util in trend:
        index = (bucket - start) // day
        if 0 <= index < FLEET_TREND_DAYS and util is not None:
            points = models.setdefault(gpu_model_id, {}).setdefault("points", [None] * FLEET_TREND_DAYS)
            points[index] = int(util)
    return {
        "models": {
            pk: GpuUse(now_pct=entry.get("now_pct"), points=tuple(entry.get("points") or (None,) * FLEET_TREND_DAYS))
            for pk, entry in models.items()
        },
        "nodes": nodes,
    }
