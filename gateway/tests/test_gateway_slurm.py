"""Through the gateway to an instance the Slurm backend launched on the real test cluster (``make
slurm``): the job's sshd runs on the node Slurm chose, at that node's address, and the gateway finds it
there from the job's report. The owner runs a command, copies files both ways with scp and forwards a
port with ``ssh -L``; a stranger is refused. The instance's direct SSH command names the node, where
the console's host has no such port, and the gateway's command names the gateway.

The nodes of the test cluster share this host; the job binds 127.0.0.2, a loopback address of its own,
so that "the node's address" and "the console's host" differ as they do on a real cluster."""

from __future__ import annotations

import pytest

from gateway.models import GatewaySession, InstanceHostKey
from gateway.tests.conftest import echo_once, free_port, openssh, person, through_tunnel
from instances.tests.conftest import committed, launch
from providers.local.tests.local_helpers import wait_running, wait_until

pytestmark = [pytest.mark.slurm, pytest.mark.local, pytest.mark.django_db(transaction=True)]

NODE_ADDRESS = "127.0.0.2"


def test_ssh_scp_and_forwarding_through_the_gateway_to_a_slurm_jobs_node(
    on_slurm, slurm_cluster, gateway, alice, charlie, tmp_path, client_for
):
    on_slurm(services=("ssh",), BIND=NODE_ADDRESS)
    owner = person(alice, tmp_path, "alice")
    stranger = person(charlie, tmp_path, "charlie")
    with committed():
        instance = launch(alice, gpu="h200", count=2, region="slurm-local", ssh_keys=[owner.ssh_key])
    wait_running(instance)
    state = instance.backend_state
    job = slurm_cluster.job(state["job_id"])
    assert job["job_state"] == "RUNNING" and job["nodes"] == state["node"] == instance.node.name

    # Direct SSH names the node's address; the gateway's command names the gateway (the console's host).
    entry = client_for(alice).get(f"/api/v1/instances/{instance.pk}/").json()["entry_points"]
    ssh_port = instance.entry_points["ssh_port"]
    assert entry["ssh_command"] == f"ssh -p {ssh_port} {instance.entry_points['ssh_user']}@{NODE_ADDRESS}"
    assert entry["gateway_command"] == f"ssh -p 2222 {instance.pk}@testserver"

    login = f"{instance.pk}@127.0.0.1"
    # The session runs on the node: sshd there (SSH_CONNECTION's server address), with the job's cards.
    result = openssh("ssh", owner, gateway, login, "echo $CUDA_VISIBLE_DEVICES; echo $SSH_CONNECTION")
    assert result.returncode == 0, result.stderr
    cards, connection = result.stdout.decode().splitlines()
    assert cards == ",".join(str(i) for i in range(len(state["gpus"])))  # numbered from 0 in the job's cgroup
    assert connection.split()[2:] == [NODE_ADDRESS, str(ssh_port)]
    assert openssh("ssh", owner, gateway, login, "exit 3").returncode == 3

    payload = tmp_path / "weights.bin"
    payload.write_bytes(bytes(range(256)) * 4096)  # 1 MiB
    up = openssh("scp", owner, gateway, str(payload), f"{login}:weights.bin")
    assert up.returncode == 0, up.stderr
    back = tmp_path / "back.bin"
    down = openssh("scp", owner, gateway, f"{login}:weights.bin", str(back))
    assert down.returncode == 0, down.stderr
    assert back.read_bytes() == payload.read_bytes()

    # ssh -L: opened from the node, to a service listening on the node's address.
    service_port = free_port()
    served = echo_once(service_port, host=NODE_ADDRESS)
    answer = through_tunnel(
        owner, gateway, login, local_port=free_port(), target=f"{NODE_ADDRESS}:{service_port}", line=b"ping\n"
    )
    assert answer == b"instance says: ping\n"
    served.join(10)

    # Charlie's key is his account's, not for Alice's instance: signed in, told, let nowhere.
    refused = openssh("ssh", stranger, gateway, login, "echo should-not-run")
    assert refused.returncode == 1
    assert b"should-not-run" not in refused.stdout
    assert f"No instance {instance.pk} in your account".encode() in refused.stderr

    connected = GatewaySession.objects.filter(user=alice, instance=instance, outcome="connected")
    assert connected.count() >= 5
    refusals = GatewaySession.objects.filter(user=charlie, outcome="refused", instance=None)
    wait_until(refusals.exists, timeout=5, what="the refusal's log row")  # written as the connection opens
    assert InstanceHostKey.objects.filter(instance=instance).exists()  # pinned at the first contact
