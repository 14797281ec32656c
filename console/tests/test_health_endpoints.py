"""Liveness answers whatever else is down; readiness answers 503 naming the service that is."""

from __future__ import annotations

import os

import pytest
import redis
from django.conf import settings
from django.db.utils import ConnectionHandler
from django.test import override_settings

from console import health

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
NOTHING_LISTENS = "redis://127.0.0.1:1/0"  # port 1: refused at once


def test_liveness_answers_without_touching_the_database(client):
    # No `db` fixture: pytest-django fails any query this makes.
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


def test_readiness_answers_when_everything_does(client, db):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {"database": "ok", "cache": "ok", "broker": "ok"}}


def test_readiness_reaches_redis_as_cache_and_broker(client, db):
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=5).ping()
    except redis.RedisError as exc:
        pytest.skip(f"no Redis at {REDIS_URL}: {exc}")
    on_redis = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
    with override_settings(CACHES=on_redis, CELERY_BROKER_URL=REDIS_URL, CELERY_BROKER_TRANSPORT_OPTIONS={}):
        response = client.get("/readyz")
    assert response.status_code == 200, response.json()


@pytest.fixture
def broken_database(monkeypatch):
    """The readiness check's connections, pointed at a port where no database listens."""
    handler = ConnectionHandler({"default": {**settings.DATABASES["default"], "HOST": "127.0.0.1", "PORT": "1"}})
    monkeypatch.setattr(health, "connections", handler)
    yield
    handler.close_all()


def test_readiness_is_503_when_the_database_is_down(client, db, broken_database):
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable" and body["failed"] == ["database"]
    assert body["checks"]["database"] == "OperationalError"
    assert body["checks"]["cache"] == body["checks"]["broker"] == "ok"
    assert client.get("/healthz").status_code == 200  # alive all the same: a restart would not help


@override_settings(
    CACHES={"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": NOTHING_LISTENS}}
)
def test_readiness_is_503_when_the_cache_is_down(client, db):
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["failed"] == ["cache"]


@override_settings(CELERY_BROKER_URL=NOTHING_LISTENS, CELERY_BROKER_TRANSPORT_OPTIONS={})
def test_readiness_is_503_when_the_broker_is_down(client, db):
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["failed"] == ["broker"]


@override_settings(
    CACHES={"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": NOTHING_LISTENS}},
    CELERY_BROKER_URL=NOTHING_LISTENS,
    CELERY_BROKER_TRANSPORT_OPTIONS={},
)
def test_readiness_names_every_failure_and_no_address(client, db, broken_database):
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["failed"] == ["database", "cache", "broker"]
    assert "127.0.0.1" not in response.content.decode()  # the page is public; the log has the details
