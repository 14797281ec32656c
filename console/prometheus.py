"""The console's own metrics for Prometheus: ``GET /metrics``, for the operator, not for users.

Protected: with ``CONSOLE_METRICS_TOKEN`` set, a scrape must send ``Authorization: Bearer <token>``;
without one, only ``CONSOLE_METRICS_ALLOWED_IPS`` (loopback by default) may scrape. Anything else is a
404, so the endpoint does not announce itself.

What it carries (prometheus-client's text format):

- ``console_http_requests_total`` and ``console_http_request_duration_seconds``, by method and status
  class, counted by ``RequestMetricsMiddleware`` in this process (one web process per scrape target;
  several behind one address need prometheus-client's multiprocess mode, PROMETHEUS_MULTIPROC_DIR);
- ``console_celery_tasks_total{task, outcome}``: every worker counts its tasks' outcomes in the shared
  cache (Celery signals, below), so any web process reports them all;
- business gauges read from the database at scrape time: instances by state and region, cards free
  and used per GPU model, real GPU utilisation per model (the last 5 minutes of samples), settlement
  lag and unsettled meters, quota requests waiting and the age of the oldest, e-mails and webhook
  deliveries not sent yet and the age of the oldest.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import time
from collections.abc import Iterator
from datetime import timedelta

from celery import current_app
from celery.signals import task_failure, task_retry, task_success
from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.db.models import Count, Min, Sum
from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from core.cache import counter_incr
from instances.models import Instance, Node, QuotaRequest
from notifications.models import EmailDelivery, WebhookDelivery

REQUESTS = Counter("console_http_requests", "HTTP requests answered, by method and status class.", ["method", "status"])
LATENCY = Histogram(
    "console_http_request_duration_seconds",
    "Time to answer an HTTP request, by method.",
    ["method"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
TASK_OUTCOMES = ("success", "failure", "retry")
_TASK_KEY = "console:metrics:task:{name}:{outcome}"


class RequestMetricsMiddleware:
    """Counts and times every request (the /metrics scrape too: it is a request like another)."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        LATENCY.labels(request.method).observe(time.perf_counter() - started)
        REQUESTS.labels(request.method, f"{response.status_code // 100}xx").inc()
        return response


def _count_task(outcome: str, sender) -> None:
    name = getattr(sender, "name", None) or str(sender)
    key = _TASK_KEY.format(name=name, outcome=outcome)
    with contextlib.suppress(Exception):  # a counter must never fail the task it counts
        counter_incr(key)


@task_success.connect
def _on_success(sender=None, **kwargs) -> None:
    _count_task("success", sender)


@task_failure.connect
def _on_failure(sender=None, **kwargs) -> None:
    _count_task("failure", sender)


@task_retry.connect
def _on_retry(sender=None, **kwargs) -> None:
    _count_task("retry", sender)


class ConsoleCollector(Collector):
    """The business gauges and the tasks' counters, read when Prometheus scrapes (about ten queries)."""

    def collect(self) -> Iterator:
        now = timezone.now()
        instances = GaugeMetricFamily("console_instances", "Instances by state and region.", labels=["state", "region"])
        for row in Instance.objects.values("status", "region__slug").annotate(n=Count("id")).order_by():
            instances.add_metric([row["status"], row["region__slug"]], row["n"])
        yield instances

        cards = GaugeMetricFamily(
            "console_gpu_cards",
            "GPU cards on healthy nodes, free and used, per GPU model.",
            labels=["gpu_model", "state"],
        )
        for row in (
            Node.objects.filter(is_healthy=True)
            .values("gpu_model__slug")
            .annotate(total=Sum("total_cards"), free=Sum("free_cards"))
            .order_by()
        ):
            cards.add_metric([row["gpu_model__slug"], "free"], row["free"] or 0)
            cards.add_metric([row["gpu_model__slug"], "used"], (row["total"] or 0) - (row["free"] or 0))
        yield cards

        utilisation = GaugeMetricFamily(
            "console_gpu_utilization_ratio",
            "Average GPU utilisation of running instances' cards over the last 5 minutes, per GPU model.",
            labels=["gpu_model"],
        )
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT m.slug, avg(s.utilization_pct) / 100.0 FROM metrics_cardsample s"
                " JOIN instances_instance i ON i.id = s.instance_id JOIN instances_gpumodel m ON m.id = i.gpu_model_id"
                " WHERE s.at >= %s AND s.utilization_pct IS NOT NULL GROUP BY m.slug",
                [now - timedelta(minutes=5)],
            )
            for slug, ratio in cursor.fetchall():
                utilisation.add_metric([slug], float(ratio))
            yield utilisation

            cursor.execute(
                "SELECT count(*), min(started_at + settled_seconds * interval '1 second') FROM billing_meter"
                " WHERE stopped_at IS NULL OR started_at + settled_seconds * interval '1 second' < stopped_at"
            )
            unsettled, oldest = cursor.fetchone()
        yield GaugeMetricFamily("console_unsettled_meters", "Meters with usage not yet settled.", value=unsettled)
        lag = max(0.0, (now - oldest).total_seconds()) if oldest else 0.0
        yield GaugeMetricFamily(
            "console_settlement_lag_seconds", "How far the oldest unsettled meter's settlement lags now.", value=lag
        )

        waiting = QuotaRequest.objects.filter(status=QuotaRequest.Status.PENDING)
        first = waiting.order_by("created_at").values_list("created_at", flat=True).first()
        yield GaugeMetricFamily(
            "console_quota_requests_waiting", "Quota requests waiting for staff.", value=waiting.count()
        )
        yield GaugeMetricFamily(
            "console_quota_request_oldest_age_seconds",
            "Age of the oldest quota request waiting.",
            value=(now - first).total_seconds() if first else 0.0,
        )

        # Mail and webhooks not out yet: a growing count, or an old one, is a mail server or a receiver
        # that refuses, or tasks that are lost faster than the sweep finds them.
        outbox = GaugeMetricFamily(
            "console_notifications_pending", "E-mails and webhook deliveries not sent yet.", labels=["channel"]
        )
        oldest = GaugeMetricFamily(
            "console_notifications_pending_oldest_age_seconds",
            "Age of the oldest e-mail or webhook delivery not sent yet.",
            labels=["channel"],
        )
        for channel, model in (("email", EmailDelivery), ("webhook", WebhookDelivery)):
            pending = model.objects.filter(status="pending").aggregate(n=Count("pk"), first=Min("created_at"))
            outbox.add_metric([channel], pending["n"])
            oldest.add_metric([channel], (now - pending["first"]).total_seconds() if pending["first"] else 0.0)
        yield outbox
        yield oldest

        tasks = CounterMetricFamily("console_celery_tasks", "Celery tasks run, by outcome.", labels=["task", "outcome"])
        names = sorted(name for name in current_app.tasks if not name.startswith("celery."))
        keys = {(n, o): _TASK_KEY.format(name=n, outcome=o) for n in names for o in TASK_OUTCOMES}
        counts = cache.get_many(list(keys.values()))
        for (name, outcome), key in keys.items():
            if key in counts:
                tasks.add_metric([name, outcome], counts[key])
        yield tasks


_REGISTRY = CollectorRegistry(auto_describe=False)
_REGISTRY.register(ConsoleCollector())


def _allowed(request: HttpRequest) -> bool:
    token = getattr(settings, "CONSOLE_METRICS_TOKEN", "")
    if token:
        sent = request.headers.get("Authorization", "")
        return hmac.compare_digest(sent.encode(), f"Bearer {token}".encode())
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(net) for net in settings.CONSOLE_METRICS_ALLOWED_IPS)


def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus's scrape: this process's request metrics, then the console's gauges and task counters."""
    if not _allowed(request):
        raise Http404
    body = generate_latest(REGISTRY) + generate_latest(_REGISTRY)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
