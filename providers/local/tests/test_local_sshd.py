"""SSH into an instance with a real client: the chosen key logs in; any other key is refused."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from providers.local.tests.local_helpers import runtime_or_skip, wait_until

pytestmark = pytest.mark.local


def _keypair(directory: Path, name: str) -> tuple[Path, str]:
    key = directory / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True)
    return key, (directory / f"{name}.pub").read_text().strip()


def _ssh(key: Path, port: int, known_hosts: Path, user: str, command: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            "ssh",
            "-F",
            "/dev/null",
            "-i",
            str(key),
            "-p",
            str(port),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"UserKnownHostsFile={known_hosts}",
            "-o",
            "ConnectTimeout=5",
            f"{user}@127.0.0.1",
            command,
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.fixture
def runtime(tmp_path):
    runtime = runtime_or_skip(tmp_path / "instances", ("ssh",))
    yield runtime
    for key in runtime.instance_keys():
        runtime.destroy(key)


def test_the_chosen_key_logs_in_and_another_is_refused(runtime, tmp_path):
    chosen, chosen_pub = _keypair(tmp_path, "alice-laptop")
    other, _ = _keypair(tmp_path, "somebody-else")
    state = runtime.start("a1", gpus=["6", "7"], ssh_public_keys=[chosen_pub])
    port = state["ports"]["ssh"]
    wait_until(lambda: runtime.status("a1").overall == "running", what="sshd")
    # Pin the instance's own host key: the client verifies it is talking to this sshd.
    host_key = (runtime.paths("a1").run / "ssh_host_ed25519_key.pub").read_text().split()
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")

    result = _ssh(chosen, port, known_hosts, state["login_user"], "echo $CUDA_VISIBLE_DEVICES; pwd; echo $((6*7))")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["6,7", str(runtime.paths("a1").home), "42"]

    refused = _ssh(other, port, known_hosts, state["login_user"], "true")
    assert refused.returncode == 255
    assert "Permission denied (publickey)" in refused.stderr


def test_password_log_in_is_off(runtime, tmp_path):
    state = runtime.start("a1", ssh_public_keys=[])
    wait_until(lambda: runtime.status("a1").overall == "running", what="sshd")
    config = (runtime.paths("a1").run / "sshd_config").read_text()
    assert "PasswordAuthentication no" in config
    assert "ListenAddress 127.0.0.1" in config
    result = subprocess.run(
        ["sshd", "-T", "-f", str(runtime.paths("a1").run / "sshd_config")], capture_output=True, text=True
    )
    effective = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
    assert effective["passwordauthentication"] == "no"
    assert effective["kbdinteractiveauthentication"] == "no"
    assert effective["listenaddress"] == f"127.0.0.1:{state['ports']['ssh']}"
