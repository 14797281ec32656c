"""Stopping and destroying leave no process and no port behind; the disk survives a stop only."""

from __future__ import annotations

import subprocess

import httpx
import psutil
import pytest

from providers.local.runtime.supervisor import MARKER
from providers.local.tests.local_helpers import lab_answers, listening_ports, runtime_or_skip, wait_until

pytestmark = pytest.mark.local


@pytest.fixture
def runtime(tmp_path):
    runtime = runtime_or_skip(tmp_path, ("lab", "ssh"))
    yield runtime
    for key in runtime.instance_keys():
        runtime.destroy(key)


@pytest.fixture
def ssh_runtime(tmp_path):
    """sshd alone starts in milliseconds: enough for what does not need JupyterLab's kernels."""
    runtime = runtime_or_skip(tmp_path / "ssh-only", ("ssh",))
    yield runtime
    for key in runtime.instance_keys():
        runtime.destroy(key)


def _stray(key: str) -> subprocess.Popen:
    """What `nohup … &` in a terminal leaves behind: outside every server's tree, with the marker."""
    return subprocess.Popen(["sleep", "300"], env={MARKER: key, "PATH": "/usr/bin:/bin"}, start_new_session=True)


def _marked(key: str) -> list[int]:
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(MARKER) == key and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process.pid)
        except psutil.Error:
            continue
    return found


def _running_with_a_kernel_and_a_stray(runtime, key: str) -> tuple[dict, subprocess.Popen]:
    state = runtime.start(key, gpus=runtime.gpus.allocate(key, 1, ["0", "1"]))
    wait_until(lambda: lab_answers(runtime, key), timeout=60, what="JupyterLab")
    upstream = runtime.upstream(key, "lab")
    # A kernel: a grandchild in a process group of its own, which killpg on the server would miss.
    response = httpx.post(
        f"http://127.0.0.1:{upstream.port}{runtime.base_url(key, 'lab')}api/kernels",
        json={"name": "python3"},
        headers={"Authorization": f"token {upstream.secret}"},
    )
    assert response.status_code == 201
    return state, _stray(key)


def test_stop_leaves_no_process_and_no_port(runtime):
    state, stray = _running_with_a_kernel_and_a_stray(runtime, "a1")
    ports = set(state["ports"].values())
    assert ports <= listening_ports()
    assert len(runtime.processes("a1")) >= 4  # lab, its kernel, sshd, the stray

    runtime.stop("a1")

    stray.wait(timeout=5)
    assert runtime.processes("a1") == []
    assert _marked("a1") == []
    assert not ports & listening_ports()
    assert runtime.ports.get("a1") == {}
    assert runtime.gpus.get("a1") == []  # its card went back to the host
    assert runtime.status("a1").overall == "stopped"


def test_stop_keeps_the_disk_and_a_new_start_finds_it(ssh_runtime):
    runtime = ssh_runtime
    runtime.start("a1")
    (runtime.paths("a1").home / "train.py").write_text("print('hello')\n")
    runtime.stop("a1")
    runtime.stop("a1")  # stopped counts as done
    assert (runtime.paths("a1").home / "train.py").read_text() == "print('hello')\n"
    runtime.start("a1")
    wait_until(lambda: runtime.status("a1").overall == "running", what="servers after a restart")
    assert (runtime.paths("a1").home / "train.py").exists()


def test_destroy_removes_everything_and_repeats_harmlessly(ssh_runtime):
    runtime = ssh_runtime
    state = runtime.start("a1")
    stray = _stray("a1")
    wait_until(lambda: runtime.status("a1").overall == "running", what="sshd")
    base = runtime.paths("a1").base

    runtime.destroy("a1")
    runtime.destroy("a1")

    stray.wait(timeout=5)
    assert not base.exists()
    assert _marked("a1") == []
    assert not set(state["ports"].values()) & listening_ports()
    assert runtime.status("a1").overall == "gone"
    assert "a1" not in runtime.ports.all()


def test_restart_makes_new_processes_on_the_same_ports_and_cards(ssh_runtime):
    runtime = ssh_runtime
    cards = runtime.gpus.allocate("a1", 2, ["0", "1", "2"])
    state = runtime.start("a1", gpus=cards)
    old = runtime.status("a1").servers["ssh"].pid

    assert runtime.restart("a1") == state

    wait_until(lambda: runtime.status("a1").overall == "running", what="sshd after the restart")
    assert runtime.status("a1").servers["ssh"].pid != old
    assert runtime.gpus.get("a1") == cards
    assert not psutil.pid_exists(old) or psutil.Process(old).status() == psutil.STATUS_ZOMBIE
