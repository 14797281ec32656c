"""Under ASGI a request crosses between the event loop and a worker thread a handful of times, not
once per middleware: the chain runs synchronously (``core.middleware.SynchronousChain``)."""

from __future__ import annotations

from asgiref.sync import SyncToAsync, async_to_sync
from django.test import AsyncClient


def test_a_request_hops_between_threads_a_few_times_not_once_per_middleware(monkeypatch, settings):
    hops = []
    real = SyncToAsync.__call__

    async def counted(self, *args, **kwargs):
        hops.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", counted)
    response = async_to_sync(AsyncClient().get)("/healthz")
    assert response.status_code == 200
    # The request-started and -finished signals, the chain, the view: not one for each of the
    # dozen middleware's process_request and process_response.
    assert len(hops) <= 5, hops
