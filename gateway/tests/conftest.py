"""The gateway, listening on a free port in a thread of its own, and the people and keys that use it.

The gateway reads the database from its own threads, so these tests commit (``transaction=True``).
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import asyncssh
import pytest

from accounts.services import ssh_key_add
from gateway.server import gateway_drain, gateway_serve
from instances.catalogue import catalogue_seed
from instances.tests.conftest import (
    backends,
    fund,
    running,
    this_host,  # noqa: F401 (a fixture: the local backend)
)
from providers.slurm.tests.cluster_fixtures import (
    on_slurm,  # noqa: F401 (a fixture: the Slurm backend on the test cluster)
    slurm_cluster,  # noqa: F401 (a fixture: the test cluster, or a skip)
    slurm_tmp_path,  # noqa: F401 (a fixture: a directory tenants' jobs pass through)
)

pytestmark = pytest.mark.django_db(transaction=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LoopThread:
    """An event loop in a background thread: servers run there while the test thread drives clients."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, awaitable, timeout: float = 30):
        async def wait():
            return await awaitable

        return asyncio.run_coroutine_threadsafe(wait(), self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def loop_thread():
    thread = LoopThread()
    yield thread
    thread.stop()


@pytest.fixture(autouse=True)
def simulated_cloud(settings):
    settings.PROVISIONING_BACKENDS = backends()
    settings.INSTANCES_REDRIVE_AFTER_S = 0
    settings.GATEWAY_ENABLED = True
    settings.GATEWAY_PORT = 2222


@pytest.fixture
def gateway(loop_thread, transactional_db) -> int:
    """The gateway's port."""
    port = free_port()
    acceptor = loop_thread.run(gateway_serve(host="127.0.0.1", port=port))
    yield port

    async def close():
        acceptor.close()
        await acceptor.wait_closed()
        await gateway_drain()

    loop_thread.run(close())


@pytest.fixture
def catalogue(transactional_db):
    catalogue_seed()


@dataclass
class Person:
    user: object
    key: asyncssh.SSHKey  # the private key on their laptop
    key_path: Path  # the same, as a file for OpenSSH's clients
    ssh_key: object  # the account's SSHKey row


def person(user, tmp_path: Path, name: str, *, money: int = 1_000_000) -> Person:
    if money:
        fund(user, money)
    key = asyncssh.generate_private_key("ssh-ed25519", comment=f"{name}@laptop")
    path = tmp_path / name
    key.write_private_key(str(path))
    path.chmod(0o600)
    row = ssh_key_add(user=user, name=f"{name}-laptop", public_key=key.export_public_key().decode())
    return Person(user=user, key=key, key_path=path, ssh_key=row)


@pytest.fixture
def world(alice, charlie, catalogue, tmp_path):
    """Alice with a key and a running instance "train" that accepts it; Charlie with a key of his own."""
    a = person(alice, tmp_path, "alice")
    c = person(charlie, tmp_path, "charlie")
    instance = running(alice, name="train", ssh_keys=[a.ssh_key])
    assert instance.status == "running", instance.status_reason
    return {"alice": a, "charlie": c, "instance": instance}


class Banners(asyncssh.SSHClient):
    """A client that keeps the auth banners the server sent."""

    def __init__(self) -> None:
        self.banners: list[str] = []

    def auth_banner_received(self, msg: str, lang: str) -> None:
        self.banners.append(msg)


def connect(port: int, login: str, key: asyncssh.SSHKey, **kwargs):
    """``asyncssh.connect`` to the gateway as a user's laptop would, with nothing from the environment."""
    return asyncssh.connect(
        "127.0.0.1",
        port,
        username=login,
        client_keys=[key],
        known_hosts=None,
        agent_path=None,
        config=(),
        **kwargs,
    )


def ssh_options(person) -> list[str]:
    """OpenSSH client options for ``person``: their key alone, nothing from ~/.ssh, no prompts."""
    return [
        "-F",
        "/dev/null",
        "-i",
        str(person.key_path),
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "BatchMode=yes",
    ]


def openssh(tool: str, person, port: int, *args: str, **kwargs) -> subprocess.CompletedProcess:
    """One of OpenSSH's clients (ssh, scp, sftp) as ``person``, with nothing from ~/.ssh."""
    options = [*ssh_options(person), "-o", "LogLevel=ERROR"]
    port_flag = ["-P" if tool == "scp" else "-p", str(port)] if tool != "sftp" else ["-P", str(port)]
    return subprocess.run([tool, *options, *port_flag, *args], capture_output=True, timeout=60, **kwargs)


def echo_once(port: int, host: str = "127.0.0.1") -> threading.Thread:
    """A server on the instance's host that answers one line, as a user's service would."""
    server = socket.create_server((host, port))

    def serve():
        with server:
            conn, _ = server.accept()
            with conn:
                conn.sendall(b"instance says: " + conn.makefile("rb").readline())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def through_tunnel(person, port: int, login: str, *, local_port: int, target: str, line: bytes) -> bytes:
    """``ssh -N -L local_port:target`` through the gateway as ``person``; send ``line`` into the tunnel
    and return the answer (waiting, boundedly, for the tunnel to listen)."""
    tunnel = subprocess.Popen(
        [
            "ssh",
            *ssh_options(person),
            "-o",
            "ExitOnForwardFailure=yes",
            "-N",
            "-L",
            f"127.0.0.1:{local_port}:{target}",
            "-p",
            str(port),
            login,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", local_port), timeout=10) as sock:
                    sock.sendall(line)
                    return sock.makefile("rb").readline()
            except (ConnectionRefusedError, ConnectionResetError):
                assert tunnel.poll() is None, tunnel.stderr.read()
                assert time.monotonic() < deadline, "the tunnel never listened"
                time.sleep(0.2)
    finally:
        tunnel.terminate()
        tunnel.wait(10)
