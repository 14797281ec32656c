"""Port allocation: distinct, remembered, free on the host, released on request."""

from __future__ import annotations

import multiprocessing
import socket
from concurrent.futures import ProcessPoolExecutor

import pytest

from providers.local.runtime.ports import NoFreePort, PortRegistry


def _allocate(args):
    path, key = args
    return PortRegistry(path, low=21000, high=21999).allocate(key, ["lab", "code", "ssh"])


def test_two_instances_never_share_a_port(tmp_path):
    registry = PortRegistry(tmp_path / "ports.json", low=21000, high=21999)
    a = registry.allocate("a", ["lab", "code", "ssh"])
    b = registry.allocate("b", ["lab", "code", "ssh"])
    assert len(set(a.values()) | set(b.values())) == 6


def test_allocations_from_many_processes_at_once_do_not_collide(tmp_path):
    path = tmp_path / "ports.json"
    with ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(pool.map(_allocate, [(path, f"k{i}") for i in range(12)]))
    ports = [port for result in results for port in result.values()]
    assert len(ports) == len(set(ports)) == 36
    assert set(PortRegistry(path).all()) == {f"k{i}" for i in range(12)}


def test_allocating_again_returns_the_same_ports(tmp_path):
    registry = PortRegistry(tmp_path / "ports.json", low=21000, high=21999)
    first = registry.allocate("a", ["lab", "ssh"])
    assert PortRegistry(tmp_path / "ports.json", low=21000, high=21999).allocate("a", ["lab", "ssh"]) == first


def test_a_port_in_use_on_the_host_is_skipped(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        registry = PortRegistry(tmp_path / "ports.json", low=port, high=port)
        with pytest.raises(NoFreePort):
            registry.allocate("a", ["lab"])


def test_release_frees_the_ports(tmp_path):
    registry = PortRegistry(tmp_path / "ports.json", low=21000, high=21001)
    registry.allocate("a", ["lab", "ssh"])
    with pytest.raises(NoFreePort):
        registry.allocate("b", ["lab"])
    registry.release("a")
    registry.release("a")  # already released counts as done
    assert registry.get("a") == {}
    assert len(registry.allocate("b", ["lab", "ssh"])) == 2
