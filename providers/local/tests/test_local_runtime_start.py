"""Starting an instance on the local runtime: real servers, once, on ports of their own."""

from __future__ import annotations

import psutil
import pytest

from providers.local.runtime.supervisor import MARKER, Mount, ServerState
from providers.local.tests.local_helpers import lab_answers, listening_ports, runtime_or_skip, wait_until

pytestmark = pytest.mark.local


@pytest.fixture(scope="module")
def volume(tmp_path_factory):
    return tmp_path_factory.mktemp("datasets")


@pytest.fixture(scope="module")
def running(tmp_path_factory, volume):
    """One instance with JupyterLab and sshd, started once for the module (JupyterLab takes seconds)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("DATABASE_URL", "postgres://secret@db/console")  # the console's own secrets must not leak
    runtime = runtime_or_skip(tmp_path_factory.mktemp("instances"), ("lab", "ssh"))
    state = runtime.start("a1", owner_ref="user-1", gpus=["4", "5"], mounts=[Mount(str(volume), "/datasets")])
    mp.undo()
    wait_until(lambda: runtime.status("a1").overall == "running", timeout=120, what="servers to listen")
    yield runtime, state
    runtime.destroy("a1")


def test_starting_twice_makes_one_set_of_processes(running):
    runtime, state = running
    servers = {name: s.pid for name, s in runtime.status("a1").servers.items()}
    assert runtime.start("a1", owner_ref="user-1", gpus=["4", "5"]) == state
    assert {name: s.pid for name, s in runtime.status("a1").servers.items()} == servers
    # One JupyterLab on the host for a1 (sshd rewrites its own environment area, so it is counted by pid).
    labs = [
        p
        for p in psutil.process_iter(["environ", "cmdline"])
        if (p.info["environ"] or {}).get(MARKER) == "a1" and "--ServerApp.ip=127.0.0.1" in (p.info["cmdline"] or [])
    ]
    assert [p.pid for p in labs] == [servers["lab"]]


def test_servers_listen_on_their_allocated_ports(running):
    runtime, state = running
    assert set(state["ports"]) == {"lab", "ssh"}
    assert set(state["ports"].values()) <= listening_ports()
    assert runtime.status("a1").overall == "running"
    assert lab_answers(runtime, "a1")


def test_servers_run_in_the_instance_directory_with_its_gpus_and_volumes(running, volume):
    runtime, _ = running
    home = runtime.paths("a1").home
    lab = psutil.Process(runtime.status("a1").servers["lab"].pid)
    environ = lab.environ()
    assert lab.cwd() == str(home)
    assert environ["CUDA_VISIBLE_DEVICES"] == "4,5"
    assert environ["HOME"] == str(home)
    assert environ["CONSOLE_VOLUME_DATASETS"] == str(home / "datasets")
    assert "DATABASE_URL" not in environ
    assert (home / "datasets").resolve() == volume


def test_two_instances_never_share_a_port(tmp_path):
    runtime = runtime_or_skip(tmp_path, ("ssh",))
    try:
        ports = [runtime.start(key)["ports"]["ssh"] for key in ("b1", "b2", "b3")]
        assert len(set(ports)) == 3
        for key in ("b1", "b2", "b3"):
            wait_until(lambda key=key: runtime.status(key).overall == "running", what=f"{key}'s sshd")
        assert set(ports) <= listening_ports()
    finally:
        for key in runtime.instance_keys():
            runtime.destroy(key)


def test_status_of_an_unknown_instance_is_gone(tmp_path):
    runtime = runtime_or_skip(tmp_path, ("ssh",))
    status = runtime.status("never-made")
    assert not status.exists
    assert status.overall == "gone"


def test_a_new_instance_reports_starting_until_it_listens(tmp_path):
    runtime = runtime_or_skip(tmp_path, ("lab",))
    try:
        runtime.start("c1")
        assert runtime.status("c1").servers["lab"].state in (ServerState.STARTING, ServerState.RUNNING)
        assert runtime.status("c1").overall in ("starting", "running")
    finally:
        runtime.destroy("c1")
