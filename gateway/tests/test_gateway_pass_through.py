"""Through the gateway to a real SSH server standing in for an instance's sshd (an asyncssh server that
accepts only the instance's gateway key), with OpenSSH's own clients: commands with their streams and
exit status, sftp and scp (subsystem pass-through), and ``ssh -L``. The same against the local backend's
real sshd is in ``test_gateway_local.py``."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time

import asyncssh
import pytest
from asyncssh.sftp import run_sftp_server

from gateway import keys
from gateway.server import PassThroughProcess
from gateway.tests.conftest import connect, free_port, openssh, ssh_options
from providers import SshTarget
from providers.simulated.backend import SimulatedBackend

pytestmark = pytest.mark.django_db(transaction=True)


class FakeInstanceSshd(asyncssh.SSHServer):
    """An instance's sshd: logs in "root" with the instance's gateway key only; forwards from itself."""

    accepted: set[bytes] = set()
    root = ""

    def begin_auth(self, username: str) -> bool:
        return True

    def public_key_auth_supported(self) -> bool:
        return True

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        return username == "root" and key.public_data in self.accepted

    def connection_requested(self, dest_host, dest_port, orig_host, orig_port) -> bool:
        return True  # as sshd does: connect from the machine

    def session_requested(self):
        return PassThroughProcess(_command, None, 3, False)


async def _command(process: asyncssh.SSHServerProcess) -> None:
    if process.subsystem == "sftp":  # as sshd runs sftp-server: its exit status is sent (0)
        server = asyncssh.SFTPServer(process.channel, chroot=FakeInstanceSshd.root)
        await run_sftp_server(server, process.stdin, process.stdout, 3)
        process.exit(0)
        return
    if process.command == "cat":
        process.stdout.write(await process.stdin.read())
        process.exit(0)
        return
    process.stdout.write(f"ran {process.command!r} as {process.get_extra_info('username')}\n".encode())
    process.stderr.write(b"a word on stderr\n")
    process.exit(3)


async def _echo_server(port: int):
    async def echo(reader, writer):
        writer.write(b"echo: " + await reader.readline())
        await writer.drain()
        writer.close()

    return await asyncio.start_server(echo, "127.0.0.1", port)


@pytest.fixture
def instance_sshd(loop_thread, world, tmp_path, monkeypatch):
    """The fake sshd for alice's instance, where the simulated cloud says its sshd listens."""
    instance = world["instance"]
    root = tmp_path / "instance-disk"
    root.mkdir()
    FakeInstanceSshd.accepted = {keys.instance_private_key(instance.pk).public_data}
    FakeInstanceSshd.root = str(root)
    port = free_port()
    server = loop_thread.run(
        asyncssh.create_server(
            FakeInstanceSshd,
            "127.0.0.1",
            port,
            server_host_keys=[asyncssh.generate_private_key("ssh-ed25519")],
            encoding=None,
            line_editor=False,
        )
    )
    monkeypatch.setattr(
        SimulatedBackend, "ssh_target", lambda self, *, key: SshTarget(host="127.0.0.1", port=port, user="root")
    )
    yield root

    async def close():
        server.close()
        await server.wait_closed()

    loop_thread.run(close())


def test_commands_pass_through_with_their_streams_and_exit_status(gateway, world, instance_sshd):
    alice, instance = world["alice"], world["instance"]
    result = openssh("ssh", alice, gateway, f"{instance.pk}@127.0.0.1", "nvidia-smi -L")
    assert result.returncode == 3
    assert result.stdout == b"ran 'nvidia-smi -L' as root\n"
    assert result.stderr == b"a word on stderr\n"

    piped = openssh("ssh", alice, gateway, "train@127.0.0.1", "cat", input=b"x" * 300_000)
    assert piped.returncode == 0
    assert piped.stdout == b"x" * 300_000


def test_sftp_passes_through(gateway, world, instance_sshd, tmp_path):
    """The sftp subsystem (what scp, sftp and VS Code use) reaches the instance's own sftp server.
    (OpenSSH's scp against a real sshd is in test_gateway_local.py: this stand-in's sftp server sends
    no exit status, which OpenSSH's scp counts as a failure.)"""
    alice, instance = world["alice"], world["instance"]
    payload = tmp_path / "weights.bin"
    payload.write_bytes(bytes(range(256)) * 4096)  # 1 MiB
    back = tmp_path / "back.bin"

    async def go():
        async with connect(gateway, str(instance.pk), alice.key) as conn, conn.start_sftp_client() as sftp:
            await sftp.put(str(payload), "/weights.bin")
            await sftp.mkdir("/runs")
            await sftp.get("/weights.bin", str(back))
            return sorted(await sftp.listdir("/"))

    listing = asyncio.run(go())
    assert (instance_sshd / "weights.bin").read_bytes() == payload.read_bytes()
    assert back.read_bytes() == payload.read_bytes()
    assert {"runs", "weights.bin"} <= set(listing)


def test_local_port_forwarding_opens_from_the_instance(gateway, world, instance_sshd, loop_thread):
    alice, instance = world["alice"], world["instance"]
    echo_port, local_port = free_port(), free_port()
    echo = loop_thread.run(_echo_server(echo_port))
    tunnel = subprocess.Popen(  # ssh -N -L: as a user would, until killed
        [
            "ssh",
            *ssh_options(alice),
            "-o",
            "ExitOnForwardFailure=yes",
            "-N",
            "-L",
            f"127.0.0.1:{local_port}:127.0.0.1:{echo_port}",
            "-p",
            str(gateway),
            f"{instance.pk}@127.0.0.1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", local_port), timeout=5) as sock:
                    sock.sendall(b"through the gateway\n")
                    answer = sock.makefile("rb").readline()
                    break
            except (ConnectionRefusedError, ConnectionResetError):
                assert tunnel.poll() is None, tunnel.stderr.read()
                assert time.monotonic() < deadline, "the tunnel never listened"
                time.sleep(0.1)
        assert answer == b"echo: through the gateway\n"
    finally:
        tunnel.terminate()
        tunnel.wait(10)

        async def close():
            echo.close()
            await echo.wait_closed()

        loop_thread.run(close())


def test_an_instance_without_the_gateway_key_is_refused_with_a_message(gateway, world, instance_sshd, settings):
    alice, instance = world["alice"], world["instance"]
    settings.GATEWAY_KEY_SECRET = "another secret: the key installed at launch no longer matches"

    async def go():
        async with connect(gateway, str(instance.pk), alice.key) as conn:
            return await conn.run("true", encoding=None)

    result = asyncio.run(go())
    assert result.exit_status == 1
    assert b"could not log in to the instance" in result.stderr
