"""gpuctl's ssh-config, cp and port-forward against a live console, an instance of the local backend
(its real sshd, ``make local-deps``) and the console's SSH gateway: rsync through the generated SSH
config, files both ways through the files API, and an HTTP request through the forward. Skips, saying
why, when the local backend's sshd is not installed."""

from __future__ import annotations

import functools
import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from gateway.tests.conftest import free_port, gateway, loop_thread, person  # noqa: F401 (fixtures)
from instances.models import Instance
from instances.tests.conftest import this_host  # noqa: F401 (a fixture)
from providers.local.tests.local_helpers import wait_running

pytestmark = [pytest.mark.local, pytest.mark.django_db(transaction=True)]

SRC = Path(__file__).resolve().parents[1] / "src"
NO_PROMPTS = ("StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "BatchMode=yes", "LogLevel=ERROR")


@pytest.fixture
def on_this_host(console, gpuctl, this_host, gateway, settings, alice, tmp_path):  # noqa: F811
    """Alice logged in, with an SSH key, and her instance "train" running on the local backend,
    reachable through the gateway."""
    this_host(services=("ssh",))
    settings.GATEWAY_ENABLED, settings.GATEWAY_PORT = True, gateway
    owner = person(alice, tmp_path, "alice", money=0)
    assert gpuctl("login", "--url", console["url"], "--token", console["token"]).code == 0
    launched = gpuctl(
        "--json", "launch", "--gpu", "h200", "--region", "local", "--image", "pytorch-2.5-cu124",
        "--name", "train", "--ssh-key", str(owner.ssh_key.pk), "--no-wait",
    )  # fmt: skip
    assert launched.code == 0, launched.stdout + launched.stderr
    instance = wait_running(Instance.objects.get(pk=launched.json()["id"]))
    return {**console, "instance": instance, "key": owner.key_path}


def test_rsync_through_the_generated_ssh_config_and_cp_both_ways(on_this_host, gpuctl, tmp_path):
    config = tmp_path / "ssh" / "gpuctl.conf"
    run = gpuctl("--json", "ssh-config", "-o", str(config), "-i", str(on_this_host["key"]))
    assert run.code == 0, run.stdout + run.stderr
    instance = on_this_host["instance"]
    (entry,) = run.json()["entries"]
    assert entry["aliases"] == ["train", str(instance.pk)[:8]] and entry["user"] == str(instance.pk)
    assert f"Host train {str(instance.pk)[:8]}\n" in config.read_text()

    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "a.txt").write_text("alpha\n")
    (data / "sub" / "b.bin").write_bytes(os.urandom(300_000))
    ssh = " ".join(["ssh", "-F", str(config), *(f"-o {option}" for option in NO_PROMPTS)])
    synced = subprocess.run(
        ["rsync", "-a", "-e", ssh, f"{data}/", "train:synced/"], capture_output=True, text=True, timeout=60
    )
    assert synced.returncode == 0, synced.stderr

    # What rsync put there comes back with gpuctl cp (the files API), byte for byte.
    copies = tmp_path / "copies"
    copies.mkdir()
    down = gpuctl("--json", "cp", "-r", "train:synced", str(copies))  # into a folder that exists, as cp -r
    assert down.code == 0, down.stdout + down.stderr
    assert (copies / "synced" / "a.txt").read_text() == "alpha\n"
    assert (copies / "synced" / "sub" / "b.bin").read_bytes() == (data / "sub" / "b.bin").read_bytes()
    again = gpuctl("--json", "cp", "-r", "train:synced", str(copies)).json()
    assert {row["outcome"] for row in again} == {"skipped"}  # complete files are not fetched twice

    # And cp uploads, resuming a partial file at the size the console reports.
    big = tmp_path / "ckpt.bin"
    big.write_bytes(os.urandom(1_000_000))
    from gpuctl import Client

    with Client(on_this_host["url"], on_this_host["token"]) as sdk:
        sdk.instances_files_upload(str(instance.pk), big.read_bytes()[:400_000], path="ckpt.bin")
    up = gpuctl("--json", "cp", str(big), "train:ckpt.bin")
    assert up.code == 0, up.stdout + up.stderr
    assert up.json() == [{"path": "ckpt.bin", "size": 1_000_000, "transferred": 600_000, "outcome": "resumed"}]
    fetched = subprocess.run(
        ["ssh", "-F", str(config), *(f"-o{option}" for option in NO_PROMPTS), "train", "cat ckpt.bin"],
        capture_output=True,
        timeout=60,
    )
    assert fetched.stdout == big.read_bytes(), fetched.stderr


def test_an_http_request_through_port_forward(on_this_host, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "hello.txt").write_text("served on the instance\n")
    # A web server on the instance: on the local backend, the instance's 127.0.0.1 is this host's.
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {
        **os.environ,
        "PYTHONPATH": str(SRC),
        "GPUCTL_URL": on_this_host["url"],
        "GPUCTL_TOKEN": on_this_host["token"],
    }
    options = [arg for option in NO_PROMPTS for arg in ("-o", option)]
    forward = subprocess.Popen(
        [sys.executable, "-m", "gpuctl", "--json", "port-forward", "train", f"0:{server.server_port}",
         "-i", str(on_this_host["key"]), *options],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
    )  # fmt: skip
    try:
        ready = forward.stdout.readline()  # printed once the forward listens, or nothing when it fails
        assert ready, forward.stderr.read()
        url = json.loads(ready)["url"]
        answer = httpx.get(url + "hello.txt", timeout=30)
        assert answer.status_code == 200 and answer.text == "served on the instance\n"
    finally:
        forward.terminate()
        forward.wait(10)
        server.shutdown()
