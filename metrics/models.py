"""Samples of each card of each instance, and their rollups.

Both tables are narrow and keyed by (instance, time, card) with no surrogate id: the primary key's
index is the chart's access path (one instance, a time range). Rows arrive in time order, so a BRIN
index on ``at`` (a few pages for millions of rows) serves the rollup and the pruning, which read by
time across every instance, without a second B-tree the size of the first. Columns run
widest first so PostgreSQL pads nothing: a raw row is 40 bytes of data. The instance is a plain UUID,
not a foreign key: samples arrive for 10,000 machines every 15 s and a constraint check per row
buys nothing (retention removes them; a released instance's rows age out like any others).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.contrib.postgres.indexes import BrinIndex
from django.db import models
from django.utils.translation import gettext_lazy as _

EPOCH = datetime(2000, 1, 1, tzinfo=UTC)  # ticks and buckets are counted from here (date_bin's origin)


def floor_to(moment: datetime, seconds: int) -> datetime:
    """``moment`` rounded down to a multiple of ``seconds`` since ``EPOCH``: the tick or bucket it falls in."""
    offset = int((moment - EPOCH).total_seconds())
    return EPOCH + timedelta(seconds=offset - offset % seconds)


class CardSample(models.Model):
    """One card of one instance at one tick (``at`` is the tick, a multiple of the sample interval,
    so a repeated collection lands on the same key and is ignored). None: the provider could not read it."""

    pk = models.CompositePrimaryKey("instance_id", "at", "card")
    at = models.DateTimeField()
    instance_id = models.UUIDField()
    memory_used_mib = models.IntegerField(null=True)
    memory_total_mib = models.IntegerField(null=True)
    card = models.SmallIntegerField()
    utilization_pct = models.SmallIntegerField(null=True)
    power_w = models.SmallIntegerField(null=True)
    temperature_c = models.SmallIntegerField(null=True)

    class Meta:
        verbose_name = _("GPU sample")
        verbose_name_plural = _("GPU samples")
        indexes = [BrinIndex(fields=["at"], name="metrics_sample_at_brin")]

    def __str__(self) -> str:
        return f"{self.instance_id} card {self.card} at {self.at:%Y-%m-%d %H:%M:%S}"


class CardRollup(models.Model):
    """One card of one instance over one bucket of ``METRICS_ROLLUP_S`` starting at ``at``: what the
    charts of a week read, and what outlives the raw samples."""

    pk = models.CompositePrimaryKey("instance_id", "at", "card")
    at = models.DateTimeField()
    instance_id = models.UUIDField()
    memory_used_max_mib = models.IntegerField(null=True)
    memory_total_mib = models.IntegerField(null=True)
    card = models.SmallIntegerField()
    samples = models.SmallIntegerField()  # raw samples folded in; weights the averages of longer buckets
    utilization_avg_pct = models.SmallIntegerField(null=True)
    utilization_max_pct = models.SmallIntegerField(null=True)
    power_avg_w = models.SmallIntegerField(null=True)
    temperature_max_c = models.SmallIntegerField(null=True)

    class Meta:
        verbose_name = _("GPU rollup")
        verbose_name_plural = _("GPU rollups")
        indexes = [BrinIndex(fields=["at"], name="metrics_rollup_at_brin")]

    def __str__(self) -> str:
        return f"{self.instance_id} card {self.card} from {self.at:%Y-%m-%d %H:%M}"


class CardProcesses(models.Model):
    """The processes on one card of one instance at the latest tick that listed any ("who is using this
    card?", beside the charts). One row per card, overwritten each tick: processes are a present-tense
    fact, not a series worth keeping, so they cost nothing per sample; pruned with the raw samples.
    Shown only while fresh (``METRICS_IDLE_STALE_S``): an older row means none are listed now."""

    pk = models.CompositePrimaryKey("instance_id", "card")
    instance_id = models.UUIDField()
    card = models.SmallIntegerField()
    at = models.DateTimeField()
    processes = models.JSONField()  # [{"pid": 48211, "name": "python3", "memory_used_mib": 130880}, …]

    class Meta:
        verbose_name = "GPU processes"

    def __str__(self) -> str:
        return f"{self.instance_id} card {self.card}: {len(self.processes)} processes"


class IdleDay(models.Model):
    """How long an instance's cards sat idle on one day (``TIME_ZONE``), counting only idle stretches of
    at least ``METRICS_IDLE_WASTE_MIN_MINUTES``: the statement's idle-waste line sums these. Kept
    after the rollups they come from are gone (one small row per instance and day)."""

    pk = models.CompositePrimaryKey("instance_id", "day")
    instance_id = models.UUIDField()
    day = models.DateField()
    idle_seconds = models.IntegerField()

    class Meta:
        verbose_name = _("idle GPU day")
        verbose_name_plural = _("idle GPU days")

    def __str__(self) -> str:
        return f"{self.instance_id} {self.day}: {self.idle_seconds} s idle"
