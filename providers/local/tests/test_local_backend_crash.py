"""A JupyterLab that dies is noticed by the reconciler, shown on the timeline with why, and started
again; one that keeps dying fails the instance with the reason, and its GPUs stop being billed."""

from __future__ import annotations

import signal

import psutil
import pytest

from instances.reconciler import instances_reconcile
from instances.tests.conftest import committed, launch
from providers.local.tests.local_helpers import wait_running, wait_until

pytestmark = pytest.mark.local


def _kill_lab(backend, key: str) -> int:
    status = wait_until(lambda: (s := backend.runtime.status(key)).servers["lab"].pid and s, what="JupyterLab")
    pid = status.servers["lab"].pid
    psutil.Process(pid).send_signal(signal.SIGKILL)
    wait_until(lambda: backend.runtime.status(key).overall == "crashed", what="the crash to show")
    return pid


def test_a_killed_jupyterlab_is_restarted_and_the_timeline_says_why(this_host, rich_alice, alice_client):
    backend = this_host(services=("lab",))
    with committed():
        instance = launch(rich_alice, gpu="h200", region="local")
    wait_running(instance)
    dead = _kill_lab(backend, instance.key)

    instances_reconcile()

    instance.refresh_from_db()
    assert instance.status == "running"
    event = instance.events.order_by("-created_at", "-id").first()
    assert (event.old, event.new) == ("running", "running")
    assert event.reason_text.startswith("JupyterLab stopped unexpectedly")
    assert event.reason_text.endswith("restarted it")
    revived = backend.runtime.status(instance.key).servers["lab"]
    assert revived.pid not in (None, dead) and psutil.Process(revived.pid).is_running()
    assert "JupyterLab stopped unexpectedly" in alice_client.get(f"/instances/{instance.pk}/").content.decode()


def test_a_jupyterlab_that_keeps_crashing_stops_the_instance_keeping_its_disk(this_host, rich_alice, settings):
    settings.INSTANCES_CRASH_LIMIT = 2
    backend = this_host(services=("lab",))
    with committed():
        instance = launch(rich_alice, gpu="h200", region="local")
    wait_running(instance)

    _kill_lab(backend, instance.key)
    instances_reconcile()
    _kill_lab(backend, instance.key)
    instances_reconcile()

    instance.refresh_from_db()
    assert instance.status == "stopped"
    assert instance.status_reason_text.startswith(
        "Stopped after repeated crashes (2 in 10 minutes), disk kept: JupyterLab stopped unexpectedly"
    )
    assert instance.node is None  # the cards went back to the node
    assert instance.key in backend.runtime.instance_keys()  # the disk is still there
    assert backend.runtime.status(instance.key).overall == "stopped"
