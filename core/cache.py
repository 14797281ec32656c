"""Django's Redis cache, with one connection pool and one client per server for the whole process.

Django's ``RedisCache`` keeps its pool on the cache object, and the cache object is per thread (per
request under ASGI, where each request runs in a thread of its own): every request opened a new
connection to Redis. Its client also builds a new ``redis.Redis`` for every operation, and building one
costs more than the command it sends. The API's rate limit reads and writes the cache on every call, so
both showed in the cost of each request. Pools and clients are thread-safe and follow a fork (redis-py
checks the process id), so one of each per server and process is enough.
"""

from __future__ import annotations

import threading

from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient

_shared: dict[tuple, object] = {}
_lock = threading.Lock()


class SharedRedisCacheClient(RedisCacheClient):
    def get_client(self, key=None, *, write=False):
        index = self._get_connection_pool_index(write)
        shared = (self._servers[index], repr(sorted(self._pool_options.items())))
        client = _shared.get(shared)
        if client is None:
            with _lock:
                client = _shared.get(shared)
                if client is None:
                    pool = self._pool_class.from_url(self._servers[index], **self._pool_options)
                    client = _shared[shared] = self._client(connection_pool=pool)
        return client


class RedisCache(DjangoRedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = SharedRedisCacheClient


def counter_incr(key: str, delta: int = 1) -> int:
    """Add ``delta`` to the counter ``key`` of the default cache, made at 0 and never expiring.

    On Redis it is one ``INCRBY`` (Django's ``incr`` needs the key to exist first: an ``add`` and an
    ``incr``, two round trips, on every Celery task the console counts). Django's Redis cache stores an
    integer as its digits, so ``cache.get`` reads the counter back as an int. Elsewhere (the suite's
    local-memory cache) ``add`` then ``incr``.
    """
    cache = caches["default"]
    if isinstance(cache, RedisCache):
        made = cache.make_and_validate_key(key)
        return cache._cache.get_client(made, write=True).incr(made, delta)
    cache.add(key, 0, timeout=None)
    return cache.incr(key, delta)
