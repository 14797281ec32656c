"""Liveness and readiness: what load balancers, Kubernetes probes and `make run`'s wait loop ask.

Liveness (``/healthz``) says the process answers requests and touches nothing else, so that an outage
of the database or Redis never makes an orchestrator restart every web process at once (a restart
would not bring the database back). Readiness (``/readyz``) says this process can serve a page now:
the database, the cache and the Celery broker answer. A web pod that is not ready is taken out of
the load balancer until they answer again, not killed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.core.cache import caches
from django.db import connections
from kombu import Connection

logger = logging.getLogger(__name__)

# Seconds a readiness probe waits for the broker to accept a connection.
BROKER_CONNECT_TIMEOUT_S = 3


def database_check() -> None:
    """Every configured database answers a query, on the connection this process serves with."""
    for connection in connections.all():
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")


def cache_check() -> None:
    """The default cache answers a read (on Redis: a round trip; it also holds the rate limits)."""
    caches["default"].get("console:readyz")


def broker_check() -> None:
    """The Celery broker accepts a connection (the setting the Celery app reads, ``CELERY_BROKER_URL``)."""
    with Connection(
        settings.CELERY_BROKER_URL,
        transport_options=getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}),
        connect_timeout=BROKER_CONNECT_TIMEOUT_S,
    ) as connection:
        # One try: a probe that retried would answer only after the prober gave up.
        connection.ensure_connection(max_retries=0)


READINESS_CHECKS: dict[str, Callable[[], None]] = {
    "database": database_check,
    "cache": cache_check,
    "broker": broker_check,
}


def readiness_get() -> dict[str, str]:
    """``{check: "ok" | the error's class name}`` for every readiness check, each run once.

    The page is public, so it names what failed and the error's type only; the message (hosts, user
    names) goes to the log.
    """
    results = {}
    for name, check in READINESS_CHECKS.items():
        try:
            check()
        except Exception as exc:
            logger.warning("readiness: %s is unavailable: %s", name, exc)
            results[name] = type(exc).__name__
        else:
            results[name] = "ok"
    return results
