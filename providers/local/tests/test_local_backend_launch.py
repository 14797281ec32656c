"""An instance launched on the local backend runs real servers: its owner reaches JupyterLab through the
console's proxy (HTTP and a kernel over WebSocket); anyone else gets 404; stop, start and release leave
exactly what they should."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from websockets.sync.client import connect

from console.tests.conftest import session_cookie
from console.tests.test_proxy_websocket import _execute, _refusal
from instances.services import instance_release, instance_start, instance_stop
from instances.tests.conftest import committed, launch
from providers.local.runtime.supervisor import MARKER
from providers.local.tests.local_helpers import asgi_server, listening_ports, wait_running, wait_until

pytestmark = [pytest.mark.local, pytest.mark.django_db(transaction=True)]


def _processes(key: str) -> list:
    import psutil

    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(MARKER) == key and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            continue
    return found


def test_the_owner_runs_code_through_the_proxy_and_a_stranger_gets_404(this_host, rich_alice, charlie):
    this_host(services=("lab",))
    with committed():
        instance = launch(rich_alice, gpu="h200", region="local", name="lab-one")
    wait_running(instance)
    assert instance.node.name == "test-host"

    with asgi_server() as base_url:
        lab = f"{base_url}/i/{instance.pk}/lab/"
        owner = {"sessionid": session_cookie(rich_alice)["sessionid"]}
        stranger = session_cookie(charlie)["sessionid"]
        assert httpx.get(f"{lab}api/status", cookies=owner, timeout=10).status_code == 200
        assert httpx.get(f"{lab}api/status", cookies={"sessionid": stranger}, timeout=10).status_code == 404

        kernel = httpx.post(
            f"{lab}api/kernels", json={"name": "python3"}, cookies=owner, headers={"Origin": base_url}, timeout=30
        )
        assert kernel.status_code == 201, kernel.text
        channels = (
            f"{base_url.replace('http://', 'ws://')}/i/{instance.pk}/lab/api/kernels/{kernel.json()['id']}/channels"
        )
        with connect(channels, origin=base_url, additional_headers={"Cookie": f"sessionid={owner['sessionid']}"}) as ws:
            assert _execute(ws, "import os; print(sum(range(10)) * 6, os.environ['CUDA_VISIBLE_DEVICES'])") == "270 0\n"
        assert _refusal(channels, origin=base_url, cookie=stranger) == 404


def test_stop_keeps_only_the_disk_start_brings_it_back_and_release_leaves_nothing(this_host, rich_alice):
    backend = this_host(services=("lab",))
    with committed():
        instance = launch(rich_alice, gpu="h200", region="local")
    wait_running(instance)
    key = instance.key
    port = backend.runtime.ports.get(key)["lab"]
    home = backend.runtime.paths(key).home
    (home / "notes.txt").write_text("kept")

    with committed():
        instance_stop(instance=instance)
    instance.refresh_from_db()
    assert instance.status == "stopped"
    assert _processes(key) == []
    assert port not in listening_ports()
    assert backend.runtime.ports.get(key) == {} and backend.runtime.gpus.get(key) == []
    assert (home / "notes.txt").read_text() == "kept"

    with committed():
        instance_start(instance=instance)
    wait_running(instance)
    wait_until(lambda: backend.poll(key=key, state={}).state == "running", what="JupyterLab again")
    assert (home / "notes.txt").read_text() == "kept"
    assert backend.runtime.gpus.get(key) == ["0"]

    with committed():
        instance_release(instance=instance)
    instance.refresh_from_db()
    assert instance.status == "released"
    assert _processes(key) == []
    assert backend.runtime.ports.get(key) == {} and backend.runtime.gpus.get(key) == []
    assert not Path(backend.runtime.paths(key).base).exists()
    assert key not in backend.runtime.instance_keys()
