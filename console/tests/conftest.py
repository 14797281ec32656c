"""Fixtures for the proxy tests: real JupyterLab servers (alice's and charlie's instances) started once
per test session by the local runtime, and the console's ASGI app under uvicorn in front of them."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest
from django.test import Client, override_settings

from console.hooks import proxy_target
from providers.local.runtime import registry
from providers.local.runtime.supervisor import LocalRuntime
from providers.local.tests.local_helpers import asgi_server, lab_answers, runtime_or_skip, wait_until


@dataclass
class ProxyWorld:
    base_url: str
    runtime: LocalRuntime
    alice_key: str
    charlie_key: str

    def own(self, key: str, user) -> None:
        """Record ``user`` as the owner of ``key`` (users are new in every transactional test)."""
        self.runtime.start(key, owner_ref=registry.owner_ref_for(user), gpus=["0"])

    def url(self, key: str, path: str = "lab/") -> str:
        return f"{self.base_url}/i/{key}/{path}"

    @property
    def ws_base(self) -> str:
        return self.base_url.replace("http://", "ws://")


@pytest.fixture(scope="session")
def proxy_world(tmp_path_factory, django_db_setup, django_db_blocker):
    root = tmp_path_factory.mktemp("instances")
    # code-server is the slowest component to install: without it, the JupyterLab tests still run.
    with_code = not LocalRuntime(root=root, services=("code",)).missing_components()
    services = ("lab", "code") if with_code else ("lab",)
    runtime = runtime_or_skip(root, services)
    alice_key, charlie_key = str(uuid.uuid4()), str(uuid.uuid4())
    # Instances started straight on the runtime, without Instance rows: the runtime's own resolver.
    with (
        override_settings(LOCAL_RUNTIME={"ROOT": root, "SERVICES": list(services), "ENGINE": "process"}),
        proxy_target.override(registry.proxy_target_for),
    ):
        registry.get_runtime.cache_clear()
        try:
            for key in (alice_key, charlie_key):
                runtime.start(key, gpus=["0"])
            with asgi_server() as base_url:
                for key in (alice_key, charlie_key):
                    wait_until(lambda key=key: lab_answers(runtime, key), timeout=60, what="JupyterLab to answer")
                yield ProxyWorld(base_url, runtime, alice_key, charlie_key)
        finally:
            with ThreadPoolExecutor() as pool:  # each server takes a moment to shut down its kernels
                list(pool.map(runtime.destroy, (alice_key, charlie_key)))
            registry.get_runtime.cache_clear()


def session_cookie(user) -> dict[str, str]:
    client = Client()
    client.force_login(user)
    return {"sessionid": client.cookies["sessionid"].value}
