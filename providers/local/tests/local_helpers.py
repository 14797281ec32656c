"""Helpers for the tests that run real user servers: a runtime in a temporary root, waiting with a
deadline, and the console's ASGI app under uvicorn in a background thread (pytest-django's
live_server is WSGI, which cannot carry WebSockets)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from providers.local.runtime.supervisor import LocalRuntime


def wait_until(predicate: Callable[[], object], *, timeout: float = 30.0, interval: float = 0.05, what: str = ""):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or predicate}")
        time.sleep(interval)


def runtime_or_skip(root: Path, services: tuple[str, ...], **kwargs) -> LocalRuntime:
    runtime = LocalRuntime(root=root, services=services, stop_timeout=3.0, **kwargs)
    missing = runtime.missing_components()
    if missing:
        pytest.skip("; ".join(missing.values()))
    return runtime


def listening_ports() -> set[int]:
    return {c.laddr.port for c in psutil.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}


def lab_answers(runtime: LocalRuntime, key: str) -> bool:
    upstream = runtime.upstream(key, "lab")
    if upstream is None:
        return False
    try:
        response = httpx.get(
            f"http://127.0.0.1:{upstream.port}{runtime.base_url(key, 'lab')}api/status",
            headers={"Authorization": f"token {upstream.secret}"},
            timeout=2,
        )
    except httpx.HTTPError:
        return False
    return response.status_code == 200


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def asgi_server() -> Iterator[str]:
    """The console's ASGI application under uvicorn on 127.0.0.1; yields its base URL."""
    import uvicorn

    from console.asgi import application

    port = free_port()
    config = uvicorn.Config(
        application,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="off",
        ws="websockets-sansio",
        timeout_graceful_shutdown=3,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, timeout=15, what="uvicorn to start")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def local_backends(root: Path, *, services=("lab",), **options) -> dict:
    """A PROVISIONING_BACKENDS value: the small simulated fleet ("default") and this host ("local",
    its own region, two simulated H200 cards) with a runtime in ``root``: the process engine (servers
    as processes, as Slurm jobs run them) unless ``ENGINE="podman"`` (containers)."""
    from instances.tests.conftest import backends

    return {
        **backends(),
        "local": {
            "BACKEND": "providers.local.backend.LocalBackend",
            "OPTIONS": {
                "REGION": "local",
                "REGION_NAME": "This host",
                "NODE": "test-host",
                "ROOT": str(root),
                "SERVICES": list(services),
                "NVIDIA_SMI": "/nonexistent/nvidia-smi",  # simulated cards, even on a host with a GPU
                "SIMULATED_GPUS": 2,
                "SIMULATED_GPU_NAME": "NVIDIA H200",
                "ENGINE": "process",
                **options,
            },
        },
    }


def wait_running(instance, *, timeout: float = 60.0):
    """Play the worker's poll until the instance is running (or fail saying where it stuck)."""
    from instances.services import instance_sync

    def up():
        instance_sync(instance_id=instance.pk)
        instance.refresh_from_db()
        return instance.status == "running"

    wait_until(up, timeout=timeout, what=f"instance {instance.pk} to run (it is {instance.status})")
    return instance
