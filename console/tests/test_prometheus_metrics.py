"""GET /metrics: Prometheus's text, kept to a token or an internal address, with the request and task
counters and the business gauges the operator watches."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from console.prometheus import _count_task
from instances.catalogue import catalogue_seed
from instances.models import QuotaRequest
from instances.tests.conftest import backends, fund, running
from metrics.models import CardSample
from metrics.services import metrics_collect
from notifications.models import EmailDelivery, Kind
from notifications.services import Message, notify


@pytest.fixture(autouse=True)
def fleet(settings):
    settings.PROVISIONING_BACKENDS = backends()


def _scrape(client: Client, **headers) -> dict:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_without_a_token_only_an_internal_address_may_scrape(db, settings):
    settings.CONSOLE_METRICS_TOKEN = ""
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="203.0.113.9").get("/metrics").status_code == 404


def test_with_a_token_the_token_is_needed_from_anywhere(db, settings):
    settings.CONSOLE_METRICS_TOKEN = "s3cret-token"
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics").status_code == 404
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 404
    assert (
        Client(REMOTE_ADDR="203.0.113.9").get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token").status_code == 200
    )


def test_it_carries_requests_tasks_and_the_business_gauges(alice, settings, django_capture_on_commit_callbacks):
    settings.CONSOLE_METRICS_TOKEN = ""
    catalogue_seed()
    fund(alice, 1_000_000)
    instance = running(alice, count=2)
    metrics_collect()
    CardSample.objects.filter(instance_id=instance.pk).update(utilization_pct=40)
    QuotaRequest.objects.create(
        user=alice,
        gpu_model=instance.gpu_model,
        cards=16,
        reason="a bigger run",
        duration_days=30,
        created_at=timezone.now() - timedelta(hours=2),
    )
    with django_capture_on_commit_callbacks(execute=False):  # its e-mail's task never ran
        notify(user=alice, kind=Kind.LOW_BALANCE, render=lambda: Message(title="Low balance"))
    EmailDelivery.objects.update(created_at=timezone.now() - timedelta(minutes=10))
    _count_task("success", type("T", (), {"name": "metrics.tasks.metrics_collect_task"}))
    _count_task("failure", type("T", (), {"name": "metrics.tasks.metrics_collect_task"}))
    client = Client(REMOTE_ADDR="127.0.0.1")
    client.get("/healthz")
    client.get("/no-such-page/")
    samples = _scrape(client)

    assert samples[("console_instances", (("region", "cn-north-1"), ("state", "running")))] == 1
    assert samples[("console_gpu_cards", (("gpu_model", "a800-80g"), ("state", "used")))] == 2
    assert samples[("console_gpu_cards", (("gpu_model", "a800-80g"), ("state", "free")))] == 2 * 8 + 8 - 2
    assert samples[("console_gpu_utilization_ratio", (("gpu_model", "a800-80g"),))] == pytest.approx(0.4)
    assert samples[("console_quota_requests_waiting", ())] == 1
    assert 7190 < samples[("console_quota_request_oldest_age_seconds", ())] < 7300
    assert samples[("console_unsettled_meters", ())] >= 1  # the running instance's meter
    assert ("console_settlement_lag_seconds", ()) in samples
    task = (("outcome", "failure"), ("task", "metrics.tasks.metrics_collect_task"))
    assert samples[("console_celery_tasks_total", task)] == 1
    assert samples[("console_http_requests_total", (("method", "GET"), ("status", "2xx")))] >= 1
    assert samples[("console_http_requests_total", (("method", "GET"), ("status", "4xx")))] >= 1  # the errors
    assert samples[("console_notifications_pending", (("channel", "email"),))] == 1
    assert 590 < samples[("console_notifications_pending_oldest_age_seconds", (("channel", "email"),))] < 700
    assert samples[("console_notifications_pending", (("channel", "webhook"),))] == 0
    assert any(name == "console_http_request_duration_seconds_count" for name, _labels in samples)
