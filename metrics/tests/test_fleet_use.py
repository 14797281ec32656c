"""The staff fleet page shows real GPU use beside allocation: per GPU model and per node now, and a
7-day trend per GPU model."""

from __future__ import annotations

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from instances.tests.conftest import running
from metrics.models import CardRollup, CardSample
from metrics.selectors import fleet_use


def _now_samples(instance, util: int) -> None:
    now = timezone.now()
    CardSample.objects.bulk_create(
        CardSample(instance_id=instance.pk, at=now - timedelta(seconds=15 * i), card=0, utilization_pct=util)
        for i in range(8)
    )


def test_use_per_gpu_model_and_node_and_the_week_s_trend(rich_alice):
    a800_busy, a800_idle = running(rich_alice, name="busy"), running(rich_alice, name="idle")
    h800 = running(rich_alice, gpu="h800")
    _now_samples(a800_busy, 90)
    _now_samples(a800_idle, 10)
    _now_samples(h800, 30)
    now = timezone.now()
    CardRollup.objects.bulk_create(
        CardRollup(instance_id=a800_busy.pk, at=now - timedelta(days=d), card=0, samples=20, utilization_avg_pct=10 * d)
        for d in range(1, 4)
    )
    use = fleet_use()
    assert use["models"][a800_busy.gpu_model_id].now_pct == 50
    assert use["models"][h800.gpu_model_id].now_pct == 30
    assert use["nodes"][h800.node_id] == 30
    points = use["models"][a800_busy.gpu_model_id].points
    assert len(points) == 7 and [p for p in points if p is not None] == [30, 20, 10]


def test_the_staff_page_shows_it(rich_alice, staff, client_for):
    instance = running(rich_alice)
    _now_samples(instance, 64)
    html = client_for(staff).get(reverse("staff_fleet")).content.decode()
    assert "GPU use" in html and "64%" in html and "Allocated" in html
