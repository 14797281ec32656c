"""Through the gateway to the simulated cloud's built-in shell, with a real asyncssh client: who gets in,
who is refused and with which words, and what the session log keeps."""

from __future__ import annotations

import asyncio

import asyncssh
import pytest

from accounts.services import ssh_key_delete
from gateway.models import GatewaySession
from gateway.tests.conftest import Banners, connect
from instances.models import Instance
from instances.services import instance_release
from instances.tests.conftest import committed, running

pytestmark = pytest.mark.django_db(transaction=True)


def _run(port, login, key, command):
    async def go():
        async with connect(port, login, key) as conn:
            return await conn.run(command, encoding=None)

    return asyncio.run(go())


def _wait_closed_log(count: int = 1) -> list[GatewaySession]:
    """The gateway stamps the end just after the client leaves: wait for it (briefly)."""
    for _ in range(100):
        rows = list(GatewaySession.objects.order_by("started_at"))
        if len(rows) >= count and all(row.ended_at for row in rows):
            return rows
        asyncio.run(asyncio.sleep(0.05))
    raise AssertionError(f"the session log was not closed: {list(GatewaySession.objects.values())}")


def test_the_owner_runs_commands_by_instance_id_and_the_session_is_logged(gateway, world):
    alice, instance = world["alice"], world["instance"]
    result = _run(gateway, str(instance.pk), alice.key, "echo hello from the gateway")
    assert (result.exit_status, result.stdout) == (0, b"hello from the gateway\n")

    gpus = _run(gateway, str(instance.pk), alice.key, "nvidia-smi")
    assert gpus.stdout.decode().count("A800") == instance.gpu_count

    unknown = _run(gateway, str(instance.pk), alice.key, "rm -rf /")
    assert unknown.exit_status == 127
    assert b"command not found" in unknown.stdout

    rows = _wait_closed_log(3)
    assert len(rows) == 3
    first = rows[0]
    assert (first.user, first.instance_id, first.outcome) == (alice.user, instance.pk, "connected")
    assert first.key_fingerprint == alice.key.get_fingerprint("sha256")
    assert first.peer.startswith("127.0.0.1:")
    assert first.duration is not None and first.duration.total_seconds() >= 0


def test_an_instance_is_also_reached_by_its_name(gateway, world):
    result = _run(gateway, "train", world["alice"].key, "hostname")
    assert result.stdout.decode().strip() == f"sim-{str(world['instance'].pk)[:8]}"


def test_an_interactive_shell_with_a_terminal(gateway, world):
    alice, instance = world["alice"], world["instance"]

    async def go():
        async with connect(gateway, str(instance.pk), alice.key) as conn:
            process = await conn.create_process(term_type="xterm", term_size=(80, 24), encoding=None)
            await process.stdout.readuntil(b"# ")
            process.stdin.write(b"whoami\r")
            answer = await process.stdout.readuntil(b"# ")
            process.stdin.write(b"exit\r")
            await process.wait_closed()
            return answer, process.exit_status

    answer, status = asyncio.run(go())
    assert b"whoami\r\nroot\r\n" in answer
    assert status == 0


def test_a_stranger_is_refused_before_signing_in_and_told_why(gateway, world):
    charlie, instance = world["charlie"], world["instance"]
    stranger = asyncssh.generate_private_key("ssh-ed25519")

    # The banner arrives before the refusal; keep the client to read it.
    banners: list[str] = []

    class Keep(Banners):
        def __init__(self) -> None:
            super().__init__()
            self.banners = banners

    async def go_keep():
        with pytest.raises(asyncssh.PermissionDenied):
            await connect(gateway, str(instance.pk), stranger, client_factory=Keep)

    asyncio.run(go_keep())
    assert any(stranger.get_fingerprint("sha256") in b and "not in any account" in b for b in banners), banners
    assert GatewaySession.objects.count() == 0  # strangers fill no table
    assert charlie  # Charlie has a key, but not for this instance: see the next test


def test_another_users_instance_is_not_found(gateway, world):
    charlie, instance = world["charlie"], world["instance"]
    result = _run(gateway, str(instance.pk), charlie.key, "echo sneaky")
    assert result.exit_status == 1
    assert result.stdout == b""
    assert f"No instance {instance.pk} in your account".encode() in result.stderr

    forward = None

    async def go():
        nonlocal forward
        async with connect(gateway, str(instance.pk), charlie.key) as conn:
            with pytest.raises(asyncssh.ChannelOpenError) as refused:
                await conn.open_connection("127.0.0.1", 5432)
            forward = refused.value.reason

    asyncio.run(go())
    assert "No instance" in forward

    rows = _wait_closed_log(2)
    assert {(row.user_id, row.instance_id, row.outcome) for row in rows} == {(charlie.user.pk, None, "refused")}


def test_a_key_not_chosen_for_the_instance_is_refused(gateway, world, tmp_path):
    from gateway.tests.conftest import person

    alice = world["alice"]
    other = person(alice.user, tmp_path, "alice-desktop", money=0)  # hers, but not chosen at launch
    result = _run(gateway, "train", other.key, "true")
    assert result.exit_status == 1
    assert b"was not chosen for instance train" in result.stderr


def test_a_key_removed_from_the_account_is_refused_on_the_next_connection(gateway, world):
    alice, instance = world["alice"], world["instance"]
    assert _run(gateway, str(instance.pk), alice.key, "true").exit_status == 0
    ssh_key_delete(user=alice.user, key_id=alice.ssh_key.pk)

    async def go():
        with pytest.raises(asyncssh.PermissionDenied):
            await connect(gateway, str(instance.pk), alice.key)

    asyncio.run(go())


def test_released_and_stopped_instances_are_refused_with_a_message(gateway, world):
    alice, instance = world["alice"], world["instance"]
    with committed():
        instance_release(instance=instance)
    instance.refresh_from_db()
    assert instance.status == Instance.Status.RELEASED
    result = _run(gateway, "train", alice.key, "true")
    assert result.exit_status == 1
    assert b"Instance train was released on" in result.stderr

    # A new "train" launched since is the one reached by name; the released one no longer counts.
    again = running(alice.user, name="train", ssh_keys=[alice.ssh_key])
    assert _run(gateway, "train", alice.key, "hostname").stdout.decode().strip() == f"sim-{str(again.pk)[:8]}"


def test_sftp_and_port_forwarding_are_refused_on_the_simulated_cloud_with_a_message(gateway, world):
    alice, instance = world["alice"], world["instance"]

    async def go():
        async with connect(gateway, str(instance.pk), alice.key) as conn:
            with pytest.raises(asyncssh.ChannelOpenError) as forward:
                await conn.open_connection("127.0.0.1", 8888)
            sftp = await conn.run(subsystem="sftp", input=b"", encoding=None)
            return forward.value.reason, sftp

    forward, sftp = asyncio.run(go())
    assert "simulated cloud" in forward
    assert sftp.exit_status == 1 and b"needs a real machine" in sftp.stderr


def test_the_built_in_shell_runs_command_lists():
    from gateway.shell import answer

    facts = {"id": "0123456789", "name": "train", "gpus": 2, "gpu": "H200", "memory_gb": 141, "image": "PyTorch"}
    assert answer("echo a; echo 'b c'", facts=facts, user="root") == ("a\nb c\n", 0)
    assert answer("false && echo no; echo yes", facts=facts, user="root") == ("yes\n", 0)
    assert answer("nvidia-smi && hostname", facts=facts, user="root")[0].splitlines()[-1] == "sim-01234567"
    assert answer("nope", facts=facts, user="root")[1] == 127
    assert answer("echo 'open", facts=facts, user="root")[1] == 2
