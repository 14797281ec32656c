"""Through the gateway to a real instance of the local backend, whose sshd (Debian's openssh-server,
`make local-deps`) accepts the gateway's key installed at launch: a command, scp both ways, and
``ssh -L`` to a server listening on the instance. Skips, saying why, when sshd is not installed."""

from __future__ import annotations

import subprocess

import pytest

from gateway.models import GatewaySession
from gateway.tests.conftest import echo_once, free_port, openssh, person, through_tunnel
from instances.tests.conftest import committed, launch
from providers.local.tests.local_helpers import wait_running

pytestmark = [pytest.mark.local, pytest.mark.django_db(transaction=True)]


def test_ssh_scp_and_port_forwarding_through_the_gateway_to_the_local_backends_sshd(
    this_host, gateway, alice, tmp_path
):
    this_host(services=("ssh",))
    owner = person(alice, tmp_path, "alice")
    with committed():
        instance = launch(alice, gpu="h200", count=2, region="local", ssh_keys=[owner.ssh_key])
    wait_running(instance)
    login = f"{instance.pk}@127.0.0.1"

    result = openssh("ssh", owner, gateway, login, "echo $CUDA_VISIBLE_DEVICES; echo $((6*7))")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [b"0,1", b"42"]
    assert openssh("ssh", owner, gateway, login, "exit 7").returncode == 7

    payload = tmp_path / "data.bin"
    payload.write_bytes(bytes(range(256)) * 8192)  # 2 MiB
    up = openssh("scp", owner, gateway, str(payload), f"{login}:data.bin")
    assert up.returncode == 0, up.stderr
    back = tmp_path / "back.bin"
    down = openssh("scp", owner, gateway, f"{login}:data.bin", str(back))
    assert down.returncode == 0, down.stderr
    assert back.read_bytes() == payload.read_bytes()

    service_port = free_port()
    served = echo_once(service_port)
    answer = through_tunnel(
        owner, gateway, login, local_port=free_port(), target=f"127.0.0.1:{service_port}", line=b"hello\n"
    )
    assert answer == b"instance says: hello\n"
    served.join(10)

    assert GatewaySession.objects.filter(user=alice, instance=instance, outcome="connected").count() >= 4


def test_a_stranger_is_refused_by_openssh_too(gateway, world, tmp_path):
    """Not ``local``-only in spirit, but it needs OpenSSH's client, as the local tests do."""
    from gateway.tests.conftest import Person

    key = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    stranger = Person(user=None, key=None, key_path=key, ssh_key=None)
    refused = openssh("ssh", stranger, gateway, f"{world['instance'].pk}@127.0.0.1", "true")
    assert refused.returncode == 255
    assert b"Permission denied (publickey)" in refused.stderr


def test_files_in_and_out_of_a_local_instance_through_the_api(this_host, alice, tmp_path, client_for):
    this_host(services=("ssh",))
    owner = person(alice, tmp_path, "alice")
    with committed():
        instance = launch(alice, gpu="h200", count=1, region="local", ssh_keys=[owner.ssh_key])
    wait_running(instance)
    client = client_for(alice)
    base = f"/api/v1/instances/{instance.pk}/files"
    payload = b"checkpoint " * 100_000
    first = client.put(
        f"{base}/content/?path=ckpt.bin&offset=0", payload[:500_000], content_type="application/octet-stream"
    )
    assert first.status_code == 200, first.content
    rest = client.put(
        f"{base}/content/?path=ckpt.bin&offset=500000", payload[500_000:], content_type="application/octet-stream"
    )
    assert rest.json()["size"] == len(payload)
    assert b"".join(client.get(f"{base}/content/?path=ckpt.bin").streaming_content) == payload
    assert "ckpt.bin" in [e["name"] for e in client.get(f"{base}/?path=.").json()]
