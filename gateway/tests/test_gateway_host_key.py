"""The onward hop's host key, trusted on first use: the gateway pins the instance's sshd host key at its
first connection, meets the same key after a stop and start (the key lives with the instance's disk),
and refuses a machine that shows another key, saying so to the user, in the session log and to the
files API, without joining anything. Needs sshd (`make local-deps`), as the other local tests."""

from __future__ import annotations

import subprocess

import pytest

from gateway.models import GatewaySession, InstanceHostKey
from gateway.tests.conftest import openssh, person
from instances.services import instance_start, instance_stop
from instances.tests.conftest import committed, launch
from providers.local.tests.local_helpers import wait_running

pytestmark = [pytest.mark.local, pytest.mark.django_db(transaction=True)]


def _fingerprint(public_key_file) -> str:
    out = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", str(public_key_file)], capture_output=True)
    return out.stdout.decode().split()[1]


def _stop_and_start(instance) -> None:
    with committed():
        instance_stop(instance=instance)
    instance.refresh_from_db()
    assert instance.status == "stopped"
    with committed():
        instance_start(instance=instance)
    wait_running(instance)


def test_the_first_contact_pins_the_key_and_a_changed_key_is_refused(
    this_host, gateway, alice, tmp_path, client_for, caplog
):
    backend = this_host(services=("ssh",))
    owner = person(alice, tmp_path, "alice")
    with committed():
        instance = launch(alice, gpu="h200", count=1, region="local", ssh_keys=[owner.ssh_key])
    wait_running(instance)
    login = f"{instance.pk}@127.0.0.1"
    host_key = backend.runtime.paths(instance.key).run / "ssh_host_ed25519_key"

    assert not InstanceHostKey.objects.filter(instance=instance).exists()
    first = openssh("ssh", owner, gateway, login, "echo first")
    assert first.returncode == 0, first.stderr
    pinned = InstanceHostKey.objects.get(instance=instance)
    assert pinned.fingerprint == _fingerprint(host_key.with_suffix(".pub"))
    assert pinned.key.split()[:2] == host_key.with_suffix(".pub").read_text().split()[:2]

    # A stop and start keeps the key with the instance's disk: the same machine, let through.
    _stop_and_start(instance)
    again = openssh("ssh", owner, gateway, login, "echo again")
    assert again.returncode == 0, again.stderr
    assert again.stdout == b"again\n"

    # Another key at the instance's address: refused, and said.
    host_key.unlink()
    host_key.with_suffix(".pub").unlink()
    _stop_and_start(instance)
    new_fingerprint = _fingerprint(host_key.with_suffix(".pub"))
    assert new_fingerprint != pinned.fingerprint
    refused = openssh("ssh", owner, gateway, login, "echo should-not-run")
    assert refused.returncode == 1
    assert b"should-not-run" not in refused.stdout
    message = refused.stderr.decode()
    assert "host key has changed" in message
    assert pinned.fingerprint in message and new_fingerprint in message

    # The pin stays the first key; the connection's log row says what happened.
    assert InstanceHostKey.objects.get(instance=instance).fingerprint == pinned.fingerprint
    session = GatewaySession.objects.filter(instance=instance).order_by("-started_at", "-id").first()
    assert session.outcome == GatewaySession.Outcome.HOST_KEY_CHANGED
    assert "host key has changed" in session.reason and new_fingerprint in session.reason
    assert any("host key changed" in r.getMessage() for r in caplog.records)

    # The files API logs in the same way, and refuses the same way.
    files = client_for(alice).get(f"/api/v1/instances/{instance.pk}/files/?path=.")
    assert files.status_code == 409
    assert "host key has changed" in files.content.decode()
