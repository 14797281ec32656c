"""A dependency that is down is a 503 with Retry-After, never a 500; one log line per outage, not a
traceback per request (core/unavailable.py)."""

from __future__ import annotations

import logging

import psycopg
import pytest
from django.db import utils as db_utils
from django.test import Client

from core import unavailable
from instances import api as instances_api

pytestmark = pytest.mark.django_db


def database_down(*args, **kwargs):
    """What a query meets when PostgreSQL is gone: a real connection refused, wrapped as Django wraps it."""
    try:
        psycopg.connect("host=127.0.0.1 port=1 connect_timeout=2")
    except psycopg.OperationalError as refused:
        raise db_utils.OperationalError(*refused.args) from refused
    raise AssertionError("port 1 accepted a connection")


@pytest.fixture(autouse=True)
def no_outage_yet():
    """The outages a process has seen are its own: each test starts with none."""
    unavailable.outages.over()


@pytest.fixture
def quiet_client(alice):
    """A logged-in client that shows the answer instead of raising the view's error (as a browser would)."""
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    return client


def test_an_api_call_while_the_database_is_down_is_a_503_that_names_it(quiet_client, monkeypatch):
    monkeypatch.setattr(instances_api.selectors, "instance_list_for", database_down)

    response = quiet_client.get("/api/v1/instances/")

    assert response.status_code == 503
    assert int(response["Retry-After"]) > 0
    assert response.json()["error"]["code"] == "unavailable"
    assert response.json()["error"]["dependency"] == "database"
    assert "database" in response.json()["error"]["message"]


def test_a_page_while_the_cache_is_down_is_a_plain_unavailable_page(settings):
    client = Client(raise_request_exception=False)
    settings.CACHES = {"default": {"BACKEND": "core.cache.RedisCache", "LOCATION": "redis://127.0.0.1:1/0"}}

    # The log-in form's rate limit reads the cache first.
    response = client.post("/accounts/login/", {"login": "alice@example.com", "password": "x"}, HTTP_ACCEPT="text/html")

    assert response.status_code == 503
    assert response["Retry-After"]
    body = response.content.decode()
    assert "Temporarily unavailable" in body and "Traceback" not in body


def test_an_error_of_the_request_itself_is_not_taken_for_an_outage(quiet_client, monkeypatch):
    def deadlock(*args, **kwargs):
        raise db_utils.OperationalError("deadlock detected") from psycopg.errors.DeadlockDetected("deadlock detected")

    monkeypatch.setattr(instances_api.selectors, "instance_list_for", deadlock)

    assert quiet_client.get("/api/v1/instances/").status_code == 500


def test_an_outage_is_logged_once_and_its_end_once_without_a_traceback_per_request(quiet_client, monkeypatch, caplog):
    caplog.set_level(logging.INFO)
    with monkeypatch.context() as down:
        down.setattr(instances_api.selectors, "instance_list_for", database_down)
        for _ in range(3):
            assert quiet_client.get("/api/v1/instances/").status_code == 503
    assert quiet_client.get("/api/v1/instances/").status_code == 200

    outage = [r for r in caplog.records if r.name == "console.outages"]
    assert [r.levelname for r in outage] == ["ERROR", "WARNING"], [r.getMessage() for r in outage]
    assert "database is unavailable" in outage[0].getMessage()
    assert "available again" in outage[1].getMessage()
    assert not [r for r in caplog.records if r.name == "django.request" and r.exc_info]
