"""The Celery task counters on Redis: one INCRBY per task (``core.cache.counter_incr``), read back as
integers by the cache (and so by ``/metrics``), starting from nothing."""

from __future__ import annotations

import os

import pytest
import redis
from django.core.cache import caches

from core.cache import RedisCache, counter_incr

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


@pytest.fixture
def redis_cache(settings):
    try:
        redis.Redis.from_url(REDIS_URL, socket_timeout=5).ping()
    except redis.RedisError:
        pytest.skip(f"Redis is not reachable at {REDIS_URL}")
    settings.CACHES = {"default": {"BACKEND": "core.cache.RedisCache", "LOCATION": REDIS_URL, "KEY_PREFIX": "ctr-test"}}
    cache = caches["default"]
    cache.delete_many(["tasks:a", "tasks:b"])
    yield cache
    cache.delete_many(["tasks:a", "tasks:b"])


def test_a_counter_is_made_at_zero_counts_and_reads_back_as_an_int(redis_cache):
    assert isinstance(redis_cache, RedisCache)
    assert [counter_incr("tasks:a"), counter_incr("tasks:a"), counter_incr("tasks:a", 5)] == [1, 2, 7]
    assert redis_cache.get("tasks:a") == 7
    assert redis_cache.get_many(["tasks:a", "tasks:b"]) == {"tasks:a": 7}


def test_without_redis_the_cache_counts_the_same(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "ctr"}}
    assert [counter_incr("tasks:b"), counter_incr("tasks:b", 2)] == [1, 3]
    assert caches["default"].get("tasks:b") == 3
