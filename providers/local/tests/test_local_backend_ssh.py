"""SSH into an instance on the local backend with the key chosen at launch; a key not chosen is refused;
the instance page shows the command that does it."""

from __future__ import annotations

import pytest

from accounts.services import ssh_key_add
from instances.tests.conftest import committed, launch
from providers.local.tests.local_helpers import wait_running
from providers.local.tests.test_local_sshd import _keypair, _ssh

pytestmark = pytest.mark.local


def test_the_chosen_key_logs_in_with_the_command_the_page_shows(this_host, rich_alice, alice_client, tmp_path):
    backend = this_host(services=("ssh",))
    chosen, chosen_pub = _keypair(tmp_path, "alice-laptop")
    other, other_pub = _keypair(tmp_path, "alice-desktop")
    laptop = ssh_key_add(user=rich_alice, name="laptop", public_key=chosen_pub)
    ssh_key_add(user=rich_alice, name="desktop", public_key=other_pub)  # hers, but not chosen for this one
    with committed():
        instance = launch(rich_alice, gpu="h200", count=2, region="local", ssh_keys=[laptop])
    wait_running(instance)

    command = alice_client.get(f"/api/v1/instances/{instance.pk}/").json()["entry_points"]["ssh_command"]
    _ssh_word, _p, port, target = command.split()
    user, host = target.split("@")
    assert (user, host) == (backend.runtime.meta(instance.key)["login_user"], "testserver")
    assert f'<code id="ssh-command">{command}</code>' in alice_client.get(f"/instances/{instance.pk}/").content.decode()

    host_key = (backend.runtime.paths(instance.key).run / "ssh_host_ed25519_key.pub").read_text().split()
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    result = _ssh(chosen, int(port), known_hosts, user, "echo $CUDA_VISIBLE_DEVICES; echo $((6*7))")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0,1", "42"]

    refused = _ssh(other, int(port), known_hosts, user, "true")
    assert refused.returncode == 255
    assert "Permission denied (publickey)" in refused.stderr
