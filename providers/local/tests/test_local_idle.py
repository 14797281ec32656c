"""Auto-stop on the local backend judges use the way people use an instance: notebook activity, an SSH
session, a VS Code window or GPU work keep it in use; an instance nobody touches goes idle, and
``instances_auto_stop`` stops it (disk kept) once its idle minutes have passed."""

from __future__ import annotations

import subprocess
import time

import httpx
import pytest

from instances.services import instance_auto_stop_set, instances_auto_stop
from instances.tests.conftest import committed, launch
from providers.local.tests.local_helpers import runtime_or_skip, wait_running, wait_until
from providers.local.tests.test_local_sshd import _keypair

pytestmark = pytest.mark.local


def _ssh_open(key, port: int, user: str, command: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            "ssh", "-F", "/dev/null", "-i", str(key), "-p", str(port),
            "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", f"{user}@127.0.0.1", command,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip


def test_notebook_activity_restarts_the_idle_clock(tmp_path):
    runtime = runtime_or_skip(tmp_path / "instances", services=("lab",))
    runtime.start("lab-box")
    try:
        wait_until(lambda: runtime.status("lab-box").overall == "running", timeout=60, what="JupyterLab")
        later = time.time() + 3600
        assert runtime.idle_seconds("lab-box", now=later) >= 3590  # nobody did anything for an hour
        assert runtime.idle_seconds("lab-box", now=later, gpu_busy=True) == 0  # GPU work is use
        assert runtime.idle_seconds("lab-box", now=later + 60) == 60  # ... remembered as the last use

        upstream = runtime.upstream("lab-box", "lab")
        kernel = httpx.post(
            f"http://127.0.0.1:{upstream.port}/i/lab-box/lab/api/kernels",
            json={"name": "python3"},
            headers={"Authorization": f"token {upstream.secret}"},
            timeout=30,
        )
        assert kernel.status_code == 201
        # Starting a kernel is activity JupyterLab records; the console's own status checks are not.
        assert runtime.idle_seconds("lab-box") <= 5
    finally:
        runtime.destroy("lab-box")


def test_an_open_ssh_session_is_use_and_closing_it_lets_the_instance_go_idle(tmp_path):
    runtime = runtime_or_skip(tmp_path / "instances", services=("ssh",))
    key, public = _keypair(tmp_path, "alice")
    runtime.start("ssh-box", ssh_public_keys=[public])
    try:
        wait_until(lambda: runtime.status("ssh-box").overall == "running", timeout=30, what="sshd")
        port, user = runtime.ports.get("ssh-box")["ssh"], runtime.meta("ssh-box")["login_user"]
        runtime._activity_mark(runtime.paths("ssh-box"), time.time() - 900)
        assert runtime.idle_seconds("ssh-box") >= 899

        session = _ssh_open(key, port, user, "sleep 20")
        try:
            wait_until(lambda: runtime.idle_seconds("ssh-box") == 0, timeout=15, what="the session to count")
        finally:
            session.terminate()
            session.wait(timeout=10)
        wait_until(lambda: not runtime._sessions_open("ssh-box", runtime.paths("ssh-box")), timeout=15)
        assert runtime.idle_seconds("ssh-box", now=time.time() + 120) >= 119
    finally:
        runtime.destroy("ssh-box")


@pytest.mark.django_db(transaction=True)
def test_an_idle_local_instance_is_stopped_with_its_disk_kept(this_host, rich_alice):
    backend = this_host(services=("ssh",))
    with committed():
        instance = launch(rich_alice, gpu="h200", region="local", name="forgotten")
    wait_running(instance)
    instance_auto_stop_set(instance=instance, at=None, idle_minutes=30)
    assert instances_auto_stop() == 0  # just started: in use

    backend.runtime._activity_mark(backend.runtime.paths(instance.key), time.time() - 31 * 60)
    with committed():
        assert instances_auto_stop() == 1
    instance.refresh_from_db()
    assert instance.status == "stopped"
    assert "idle for 30 minutes" in instance.events.get(new="stopping").reason_text
    assert backend.runtime.paths(instance.key).home.is_dir()
