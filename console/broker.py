"""Celery's Redis transport, with one Redis client per channel instead of one per command.

kombu's Redis channel builds a new ``redis.Redis`` for every operation outside the consumer's own
connection: each task sent (``LPUSH``), each acknowledgement. Building one copies redis-py's table of
some 170 reply parsers, which cost more than sending the command: a third of a millisecond of every
launch request's CPU. A client is thread-safe and takes a connection from the channel's pool for each
command, so one per channel does the same work. ``CELERY_BROKER_TRANSPORT`` names this transport
where the broker is Redis (console/settings/base.py).

It overrides a private method of kombu's: ``Transport`` is kombu's own transport, unchanged, on a
kombu outside the versions it was checked on, or with ``CONSOLE_SPEEDUP_BROKER=0`` (core.speedups).
"""

from __future__ import annotations

import threading

from kombu.transport import redis

from core import speedups


class Channel(redis.Channel):
    _lock = threading.Lock()

    def _create_client(self, asynchronous=False):
        if asynchronous:  # the consumer's: kombu manages those connections itself
            return super()._create_client(asynchronous=True)
        client = self.__dict__.get("_shared_client")
        if client is None:
            with self._lock:
                client = self.__dict__.get("_shared_client")
                if client is None:
                    client = self.__dict__["_shared_client"] = super()._create_client()
        return client


class OneClientTransport(redis.Transport):
    Channel = Channel


#: What ``CELERY_BROKER_TRANSPORT`` names (decided when kombu first loads it, after the settings).
Transport = OneClientTransport if speedups.enabled("broker") else redis.Transport
