"""The pages: the instance page carries the GPU charts (vendored uPlot, no CDN), the list a
utilisation figure and sparkline per running instance."""

from __future__ import annotations

import re
from datetime import timedelta

from django.contrib.staticfiles import finders
from django.urls import reverse
from django.utils import timezone

from instances.models import Instance
from instances.tests.conftest import running
from metrics.models import CardSample
from metrics.selectors import gpu_use_for


def _recent(instance, util: int, minutes: int = 20):
    now = timezone.now()
    CardSample.objects.bulk_create(
        CardSample(instance_id=instance.pk, at=now - timedelta(seconds=15 * i), card=0, utilization_pct=util)
        for i in range(minutes * 4)
    )


def test_the_instance_page_has_the_charts_from_vendored_files(rich_alice, alice_client):
    instance = running(rich_alice)
    html = alice_client.get(reverse("instance_detail", args=[instance.pk])).content.decode()
    assert 'id="gpu-metrics"' in html
    assert reverse("api-instance-metrics", args=[instance.pk]) in html
    assert "/static/vendor/uplot/uPlot.iife.min.js" in html and "/static/js/gpu_charts.js" in html
    # Every script and stylesheet comes from this console: none from another host (a CDN).
    assert re.findall(r'<(?:script|link)[^>]+(?:src|href)="(?:https?:)?//', html) == []
    assert finders.find("vendor/uplot/uPlot.iife.min.js") and finders.find("vendor/uplot/LICENSE")


def test_an_instance_that_never_ran_has_no_charts(rich_alice, alice_client):
    instance = running(rich_alice)
    Instance.objects.filter(pk=instance.pk).update(status=Instance.Status.FAILED, running_since=None)
    html = alice_client.get(reverse("instance_detail", args=[instance.pk])).content.decode()
    assert 'id="gpu-metrics"' not in html


def test_the_list_shows_each_running_instance_s_utilisation(rich_alice, alice_client):
    busy, idle = running(rich_alice, name="busy"), running(rich_alice, name="idle")
    _recent(busy, 87)
    _recent(idle, 0)
    html = alice_client.get(reverse("instances")).content.decode()
    assert "87%" in html and "0%" in html
    assert html.count('class="sparkline"') == 2


def test_the_live_row_keeps_its_figure(rich_alice, alice_client):
    instance = running(rich_alice)
    _recent(instance, 42)
    html = alice_client.get(reverse("instance_detail", args=[instance.pk]), {"partial": "row"}).content.decode()
    assert "42%" in html


def test_the_figure_is_the_last_buckets_average_and_the_sparkline_spans_the_hour(rich_alice):
    instance = running(rich_alice)
    _recent(instance, 50, minutes=60)
    use = gpu_use_for([instance.pk])[instance.pk]
    assert use.now_pct == 50
    assert len(use.points) == 12
    assert use.sparkline.split()[-1].endswith(",8.0")  # 50 % is half way up the 16-pixel box


def test_instances_without_samples_have_no_figure(rich_alice):
    instance = running(rich_alice)
    assert gpu_use_for([instance.pk]) == {}
