"""The onward hop's host key: trust on first use, per instance, then that key or nothing.

The gateway (and the files API, ``gateway.files``) log in to an instance's sshd at the address its
provider gives. Nothing tells the console that machine's host key in advance (it is made on the machine),
so the first connection pins the key it meets (``InstanceHostKey``) and every later one must meet the
same: a different key means another machine answers at that address (someone in the middle on the
provider's network, or a disk swapped under the instance), and the connection is refused with
``HostKeyChanged``, before anything of the user's is sent to it.

asyncssh asks the client object (``validate_host_public_key``) about every host key that its
``known_hosts`` does not list; an empty ``known_hosts`` sends each key there, where the pin decides.
"""

from __future__ import annotations

import asyncssh
from asgiref.sync import sync_to_async
from django.db import close_old_connections, connection
from django.utils.translation import gettext as _

from gateway import keys
from gateway.models import InstanceHostKey
from gateway.services import instance_host_key_pin
from providers import SshTarget


class HostKeyChanged(Exception):
    """The instance's sshd showed another host key than the pinned one; the message is the user's."""

    def __init__(self, *, pinned: str, offered: str) -> None:
        self.pinned, self.offered = pinned, offered
        super().__init__(
            _(
                "The instance's SSH host key has changed (it was %(pinned)s, it is now %(offered)s): the gateway "
                "did not connect, in case another machine is answering in its place. If the instance was "
                "rebuilt on purpose, ask support to trust its new key."
            )
            % {"pinned": pinned, "offered": offered}
        )


def _db(function):
    """An ORM call from the event loop, in the thread Django's sync code uses. The gateway's long-lived
    process refreshes a stale connection around it; a request's (the files API, maybe in a transaction)
    is left alone."""

    def call(**kwargs):
        own = not connection.in_atomic_block
        if own:
            close_old_connections()
        try:
            return function(**kwargs)
        finally:
            if own:
                close_old_connections()

    return sync_to_async(call, thread_sensitive=True)


def _pinned(*, instance_id) -> str | None:
    row = InstanceHostKey.objects.filter(instance_id=instance_id).only("key").first()
    return row.key if row else None


class _PinningClient(asyncssh.SSHClient):
    """Accepts the pinned key only, or any key when none is pinned yet (remembering which it met)."""

    def __init__(self, pinned: asyncssh.SSHKey | None) -> None:
        self.pinned = pinned
        self.offered: asyncssh.SSHKey | None = None

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        self.offered = key
        return self.pinned is None or key == self.pinned


def _fingerprint(key: asyncssh.SSHKey) -> str:
    return key.get_fingerprint("sha256")


def _line(key: asyncssh.SSHKey) -> str:
    return key.export_public_key("openssh").decode().split("\n")[0].strip()


async def instance_connect(*, instance_id, target: SshTarget, **options) -> asyncssh.SSHClientConnection:
    """Log in to instance ``instance_id``'s sshd at ``target`` with its gateway key, checking the host key
    against the pin (pinning it on first contact). Raises ``HostKeyChanged``, or what asyncssh raises."""
    pinned_line = await _db(_pinned)(instance_id=instance_id)
    pinned = asyncssh.import_public_key(pinned_line) if pinned_line else None
    # asyncssh's own order of host key algorithms, the same at every contact: a server with several host
    # keys shows the same one each time.
    client = _PinningClient(pinned)
    try:
        conn = await asyncssh.connect(
            target.host,
            target.port,
            username=target.user,
            client_factory=lambda: client,
            client_keys=[keys.instance_private_key(instance_id)],
            known_hosts=lambda host, addr, port: ([], [], []),  # every key goes to the client's check
            agent_path=None,
            config=(),
            **options,
        )
    except asyncssh.HostKeyNotVerifiable:
        if pinned is not None and client.offered is not None and client.offered != pinned:
            raise HostKeyChanged(pinned=_fingerprint(pinned), offered=_fingerprint(client.offered)) from None
        raise
    if pinned is None and client.offered is not None:
        stored = await _db(instance_host_key_pin)(
            instance_id=instance_id, key=_line(client.offered), fingerprint=_fingerprint(client.offered)
        )
        if stored.key != _line(client.offered):  # another first contact, at the same moment, met another key
            conn.close()
            raise HostKeyChanged(pinned=stored.fingerprint, offered=_fingerprint(client.offered))
    return conn
