"""A server that dies is reported as crashed, with why; starting again brings it back."""

from __future__ import annotations

import signal

import psutil
import pytest

from providers.local.runtime.supervisor import ServerState
from providers.local.tests.local_helpers import runtime_or_skip, wait_until

pytestmark = pytest.mark.local


@pytest.fixture
def runtime(tmp_path):
    runtime = runtime_or_skip(tmp_path, ("lab",))
    yield runtime
    for key in runtime.instance_keys():
        runtime.destroy(key)


def test_a_killed_jupyterlab_is_reported_and_a_start_revives_it(runtime):
    runtime.start("a1")
    status = wait_until(lambda: (s := runtime.status("a1")).overall == "running" and s, what="JupyterLab")
    pid = status.servers["lab"].pid

    psutil.Process(pid).send_signal(signal.SIGKILL)
    crashed = wait_until(lambda: (s := runtime.status("a1")).overall == "crashed" and s, what="the crash")

    assert crashed.servers["lab"].state == ServerState.CRASHED
    assert crashed.servers["lab"].pid is None
    assert "Jupyter" in crashed.servers["lab"].detail  # the tail of its log says what it was doing

    runtime.start("a1")
    revived = runtime.status("a1").servers["lab"]
    assert revived.state in (ServerState.STARTING, ServerState.RUNNING)
    assert revived.pid != pid
    assert psutil.Process(revived.pid).is_running()
