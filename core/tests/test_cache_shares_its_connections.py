"""The Redis cache keeps one connection pool and one client per process: each request (a thread of its
own under ASGI) reuses them instead of connecting to Redis again."""

from __future__ import annotations

import os
import threading

import pytest

from core.cache import RedisCache

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


@pytest.fixture
def redis_or_skip():
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=5).ping()
    except redis.RedisError:
        pytest.skip(f"no Redis at {REDIS_URL}")


def test_caches_of_different_threads_share_one_client(redis_or_skip):
    clients = []

    def request(n: int) -> None:
        cache = RedisCache(REDIS_URL, {"KEY_PREFIX": "test-shared"})  # as CacheHandler makes per thread
        cache.set(f"k{n}", n, 30)
        assert cache.get(f"k{n}") == n
        clients.append(cache._cache.get_client(write=True))

    threads = [threading.Thread(target=request, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(clients) == 4 and len({id(c) for c in clients}) == 1
    pool = clients[0].connection_pool
    assert len(pool._available_connections) + len(pool._in_use_connections) <= 4
    RedisCache(REDIS_URL, {"KEY_PREFIX": "test-shared"}).delete_many([f"k{n}" for n in range(4)])
