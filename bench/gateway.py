"""The SSH gateway's cost against direct SSH to the same sshd: connection set-up, a command, throughput.

    .venv/bin/python bench/gateway.py [--runs 20] [--megabytes 256]

A real sshd (Debian's openssh-server, as the local backend runs it: ``make local-deps``) on a free
port, and the gateway in this process on another, logging in to that sshd with its derived instance
key. The gateway's database reads (the verdict for the key, the instance's pinned host key) and its
writes (the log, the pin) are replaced by constants and a dict, so no database is needed: this measures the SSH path, which is what a user feels on every
keystroke and byte. Measured with OpenSSH's own client:

- ``ssh host true``: a new connection and one command, p50 of ``--runs``;
- ``ssh host 'cat > /dev/null' < N MB``: throughput, best of three;
- a keystroke's round trip: one byte written to ``cat`` in an open session and read back, p50 of 200
  (asyncssh's client, the same on both routes).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
os.environ.setdefault("CONSOLE_ENV", "test")
# The settings insist on a database; nothing here connects to it (see the docstring).
os.environ.setdefault("DATABASE_URL", "postgres://unused@127.0.0.1:1/unused")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_sshd(work: Path, authorized: list[str]) -> tuple[subprocess.Popen, int]:
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    port = free_port()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(work / "host_key")], check=True)
    (work / "authorized_keys").write_text("".join(line + "\n" for line in authorized))
    (work / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {work / 'host_key'}\n"
        f"AuthorizedKeysFile {work / 'authorized_keys'}\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\n"
        "AllowTcpForwarding yes\nSubsystem sftp internal-sftp\n"
    )
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen([sshd, "-D", "-e", "-f", str(work / "sshd_config")], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, port
        except OSError:
            time.sleep(0.05)
    raise SystemExit("sshd did not listen")


def _serve_gateway(instance_id, sshd_port: int, port: int) -> None:
    """The gateway's process: as ``python -m gateway`` runs it, with the database replaced by constants."""
    import django

    django.setup()
    from gateway import hostkeys, server
    from gateway.selectors import Verdict
    from providers import SshTarget

    target = SshTarget(host="127.0.0.1", port=sshd_port, user=getpass.getuser())

    class _Row:
        pk = 1

    server.gateway_verdict = lambda *, login, fingerprint: Verdict(
        user_id=1, key_fingerprint=fingerprint, instance_id=instance_id, target=target
    )
    server.gateway_session_open = lambda **kwargs: _Row()
    server.gateway_session_close = lambda **kwargs: True
    # The host key's pin (``gateway.hostkeys``): read per connection, written at the first; kept here.
    pins: dict = {}

    def pin(*, instance_id, key: str, fingerprint: str):
        return SimpleNamespace(key=pins.setdefault(instance_id, key), fingerprint=fingerprint)

    hostkeys._pinned = lambda *, instance_id: pins.get(instance_id)
    hostkeys.instance_host_key_pin = pin

    async def run() -> None:
        await server.gateway_serve(host="127.0.0.1", port=port)
        await asyncio.Event().wait()

    asyncio.run(run())


def start_gateway(instance_id, sshd_port: int):
    """The gateway in a process of its own (a thread here would share this process's GIL with the
    clients being timed, and measure that instead)."""
    import multiprocessing

    port = free_port()
    process = multiprocessing.get_context("spawn").Process(
        target=_serve_gateway, args=(instance_id, sshd_port, port), daemon=True
    )
    process.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, port
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the gateway did not listen")


def ssh(key: Path, port: int, login: str, command: str, kex: str = "", **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            "ssh",
            *(["-o", f"KexAlgorithms={kex}"] if kex else []),
            "-F",
            "/dev/null",
            "-i",
            str(key),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "LogLevel=ERROR",
            "-p",
            str(port),
            f"{login}@127.0.0.1",
            command,
        ],
        check=True,
        capture_output=True,
        **kwargs,
    )


def keystroke_ms(key: Path, port: int, login: str, rounds: int = 200) -> float:
    """p50 of a one-byte echo through ``cat`` on an open session: what typing feels like."""
    import asyncssh

    async def go() -> float:
        async with asyncssh.connect(
            "127.0.0.1", port, username=login, client_keys=[str(key)], known_hosts=None, agent_path=None, config=()
        ) as conn:
            process = await conn.create_process("cat", encoding=None)
            times = []
            for _ in range(rounds):
                started = time.perf_counter()
                process.stdin.write(b"x")
                await process.stdout.readexactly(1)
                times.append((time.perf_counter() - started) * 1000)
            process.stdin.write_eof()
            return statistics.median(times)

    return asyncio.run(go())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--megabytes", type=int, default=256)
    args = parser.parse_args()
    if not os.access(shutil.which("sshd") or "/usr/sbin/sshd", os.X_OK):
        raise SystemExit("sshd is not installed (make local-deps)")

    instance_id = uuid.uuid4()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        key = work / "user_key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        import django

        django.setup()
        from gateway.keys import instance_public_key

        user = getpass.getuser()
        sshd, sshd_port = start_sshd(
            work, [(work / "user_key.pub").read_text().strip(), instance_public_key(instance_id)]
        )
        try:
            gateway, gateway_port = start_gateway(instance_id, sshd_port)
            # OpenSSH 9 and its sshd agree on a post-quantum key exchange (sntrup761x25519), which costs
            # more than the curve25519 the gateway agrees on: "direct-curve25519" compares like with like.
            routes = {
                "direct": (sshd_port, user, ""),
                "direct-curve25519": (sshd_port, user, "curve25519-sha256"),
                "gateway": (gateway_port, str(instance_id), ""),
            }
            connect_ms: dict[str, float] = {}
            throughput: dict[str, float] = {}
            keystroke: dict[str, float] = {}
            payload = work / "payload"
            with payload.open("wb") as out:
                out.truncate(args.megabytes * 1024 * 1024)
            for name, (port, login, kex) in routes.items():
                ssh(key, port, login, "true", kex)  # warm up
                times = []
                for _ in range(args.runs):
                    started = time.perf_counter()
                    ssh(key, port, login, "true", kex)
                    times.append((time.perf_counter() - started) * 1000)
                connect_ms[name] = statistics.median(times)
                best = 0.0
                for _ in range(3):
                    with payload.open("rb") as data:
                        started = time.perf_counter()
                        ssh(key, port, login, "cat > /dev/null", kex, stdin=data)
                        best = max(best, args.megabytes / (time.perf_counter() - started))
                throughput[name] = best
                keystroke[name] = keystroke_ms(key, port, login)
        finally:
            sshd.terminate()
            sshd.wait(10)
            if "gateway" in locals():
                gateway.terminate()
                gateway.join(10)
    added = connect_ms["gateway"] - connect_ms["direct-curve25519"]
    for name in routes:
        print(f"{name:18} ssh host true p50 of {args.runs}: {connect_ms[name]:7.1f} ms; "
              f"{args.megabytes} MB in, best of 3: {throughput[name]:5.0f} MB/s; "
              f"keystroke round trip p50: {keystroke[name]:.2f} ms")  # fmt: skip
    print(f"added by the gateway (against direct-curve25519): {added:+.1f} ms per connection")
    print(
        json.dumps(
            {
                "bench": "gateway",
                "connect_p50_ms": {k: round(v, 1) for k, v in connect_ms.items()},
                "added_ms": round(added, 1),
                "throughput_mb_s": {k: round(v) for k, v in throughput.items()},
                "keystroke_p50_ms": {k: round(v, 2) for k, v in keystroke.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
