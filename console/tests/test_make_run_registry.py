"""`make run`'s private OCI registry: named in the environment it gives every process, served from
var/registry with deletes allowed, restarted when it dies; none when CONSOLE_REGISTRY names one."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import time

import httpx
import pytest

from console.embedded import EmbeddedRegistry, EmbeddedServiceError
from console.run import Supervisor, registry_default

needs_registry = pytest.mark.skipif(not shutil.which("docker-registry"), reason="needs docker-registry")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_registry_named_in_settings_is_used_and_none_is_started(tmp_path):
    env = {"CONSOLE_REGISTRY": "registry.example.com/console"}
    assert registry_default(env, var=tmp_path) is None
    assert env["CONSOLE_REGISTRY_TLS_VERIFY"] == "1"
    assert not (tmp_path / "registry").exists()


@needs_registry
def test_the_private_registry_is_named_for_every_process_and_comes_back_when_it_dies(tmp_path):
    port = _free_port()
    env = {**os.environ, "EMBEDDED_REGISTRY_PORT": str(port)}
    env.pop("CONSOLE_REGISTRY", None)
    registry = registry_default(env, var=tmp_path)
    assert env["CONSOLE_REGISTRY"] == f"127.0.0.1:{port}" and env["CONSOLE_REGISTRY_TLS_VERIFY"] == "0"
    supervisor = Supervisor(env)
    supervisor.add("registry", registry.argv())
    supervisor.start_all()
    try:
        assert registry.wait(30, supervisor.children[0].process)
        assert httpx.get(f"http://127.0.0.1:{port}/v2/").status_code == 200
        config = (tmp_path / "registry" / "config.yml").read_text()
        assert "delete:\n    enabled: true" in config and str(tmp_path / "registry" / "data") in config
        first = supervisor.children[0].process
        os.kill(first.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            supervisor.watch_once()
            child = supervisor.children[0].process
            # wall-clock: one probe of the loop, which itself waits up to 30 s for the restart
            if child is not None and child is not first and registry.wait(0.5, child):
                break
            time.sleep(0.1)
        assert supervisor.children[0].restarts == 1
        assert httpx.get(f"http://127.0.0.1:{port}/v2/").status_code == 200
    finally:
        supervisor.stop_all()


def test_a_port_taken_by_another_program_is_refused_with_a_way_out(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(EmbeddedServiceError, match="EMBEDDED_REGISTRY_PORT"):
            EmbeddedRegistry(tmp_path / "registry", port=busy.getsockname()[1]).argv()


def test_without_docker_registry_installed_the_console_runs_with_no_registry(tmp_path, monkeypatch):
    monkeypatch.setattr(EmbeddedRegistry, "installed", staticmethod(lambda: False))
    env: dict[str, str] = {}
    assert registry_default(env, var=tmp_path) is None
    assert env["CONSOLE_REGISTRY"] == ""
