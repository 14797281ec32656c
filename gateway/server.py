"""The gateway's SSH server (asyncssh): sign in with an account key, then pass everything through.

One ``GatewayConnection`` per client connection:

1. ``validate_public_key`` asks ``gateway_verdict`` for each key offered. A key no account holds is
   refused (the client says "Permission denied (publickey)", after a banner naming the key); a known
   key signs in, whatever the verdict, so that a refusal can be *said*: a shell or command prints it and
   exits 1, a forwarded port is refused with it.
2. After sign-in the connection is logged (``gateway_session_open``) and, when allowed, the gateway
   logs in to the instance's sshd with the instance's gateway key, once per connection, lazily; the
   sshd's host key must be the one pinned at first contact (``gateway.hostkeys``), or nothing is joined
   and the log row says so.
3. Each session (shell, command, subsystem such as sftp) opens the same on the instance, and the two
   are joined by asyncssh's redirection (data, EOF, window changes, signals, the exit status). Local
   port forwards (``-L``, ``direct-tcpip``; VS Code Remote-SSH uses them) open from the instance.
   On the simulated cloud the built-in shell answers instead (``gateway.shell``).
"""

from __future__ import annotations

import asyncio
import logging

import asyncssh
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.utils.translation import gettext as _

from gateway import hostkeys, keys, shell
from gateway.selectors import Verdict, gateway_verdict
from gateway.services import gateway_session_close, gateway_session_host_key_changed, gateway_session_open

logger = logging.getLogger(__name__)
# AES-GCM first, on both legs: OpenSSL does it in hardware, where asyncssh's ChaCha20-Poly1305 costs
# several times more CPU per byte (bench/gateway.py measures the copy).
CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "aes128-ctr", "aes256-ctr")
# Tasks started from asyncssh's callbacks (the log's writes): held here so none is collected mid-flight.
_background: set[asyncio.Task] = set()


def _spawn(coroutine) -> asyncio.Task:
    task = asyncio.get_running_loop().create_task(coroutine)
    _background.add(task)
    task.add_done_callback(_background.discard)
    return task


async def gateway_drain(timeout: float = 5.0) -> None:
    """Let the log's last writes finish (on shutdown, and in tests before their loop stops)."""
    if _background:
        await asyncio.wait(list(_background), timeout=timeout)


def _db(function):
    """Run an ORM call from the event loop: in a worker thread, on a connection that is still good."""

    def call(**kwargs):
        close_old_connections()
        try:
            return function(**kwargs)
        finally:
            close_old_connections()

    return sync_to_async(call, thread_sensitive=True)


class GatewayConnection(asyncssh.SSHServer):
    """One client's connection: its sign-in, its verdict, its log row and its onward connection."""

    def __init__(self) -> None:
        self.conn: asyncssh.SSHServerConnection | None = None
        self.peer = ""
        self.login = ""
        self.verdicts: dict[str, Verdict] = {}
        self.verdict: Verdict | None = None
        self._last_fingerprint = ""
        self._session_id: int | None = None
        self._upstream: asyncio.Task | None = None
        self._refused_banner_sent = False

    # --- sign-in ---------------------------------------------------------------------------------------

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.conn = conn
        conn.set_extra_info(gateway=self)
        host, port = (conn.get_extra_info("peername") or ("?", 0))[:2]
        self.peer = f"{host}:{port}"

    def begin_auth(self, username: str) -> bool:
        self.login = username
        return True

    def public_key_auth_supported(self) -> bool:
        return True

    async def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        fingerprint = key.get_fingerprint("sha256")
        # Asked twice per key (offered, then signed): the second answer is the first one's.
        if fingerprint not in self.verdicts:
            verdict = await _db(gateway_verdict)(login=username, fingerprint=fingerprint)
            if verdict is None:
                logger.info("gateway: %s offered %s, held by no account", self.peer, fingerprint)
                if self.conn is not None:
                    self.conn.send_auth_banner(
                        _("The key %(fingerprint)s is not in any account of this console.")
                        % {"fingerprint": fingerprint}
                        + "\r\n"
                    )
                return False
            self.verdicts[fingerprint] = verdict
        # The key of the last successful check is the one that signs in: asyncssh checks it, then succeeds.
        self._last_fingerprint = fingerprint
        return True

    def auth_completed(self) -> None:
        self.verdict = self.verdicts[self._last_fingerprint]
        _spawn(self._log_open())

    async def _log_open(self) -> None:
        assert self.verdict is not None
        session = await _db(gateway_session_open)(verdict=self.verdict, login=self.login, peer=self.peer)
        self._session_id = session.pk
        logger.info(
            "gateway: user %s from %s as %r: %s",
            self.verdict.user_id,
            self.peer,
            self.login,
            "connected" if self.verdict.allowed else f"refused ({self.verdict.refusal})",
        )

    def connection_lost(self, exc: Exception | None) -> None:
        if self._upstream is not None:
            self._upstream.add_done_callback(_close_upstream)
        if self.verdict is not None:
            _spawn(self._log_close())

    async def _session(self) -> int | None:
        """The log row's id, once the open has written it (it may still be on its way)."""
        for _attempt in range(50):
            if self._session_id is not None:
                return self._session_id
            await asyncio.sleep(0.1)
        return None

    async def _log_close(self) -> None:
        session_id = await self._session()
        if session_id is not None:
            await _db(gateway_session_close)(session_id=session_id)

    # --- onward ----------------------------------------------------------------------------------------

    def upstream(self) -> asyncio.Task:
        """The connection to the instance's sshd, opened once and shared by this connection's channels."""
        if self._upstream is None:
            self._upstream = asyncio.get_running_loop().create_task(self._connect_upstream())
        return self._upstream

    async def _connect_upstream(self) -> asyncssh.SSHClientConnection:
        assert self.verdict is not None and self.verdict.target is not None
        try:
            return await hostkeys.instance_connect(
                instance_id=self.verdict.instance_id,
                # The instance's sshd, at the address its provider gives: a Slurm job's node, a pod…
                target=self.verdict.target,
                connect_timeout=settings.GATEWAY_CONNECT_TIMEOUT_S,
                keepalive_interval=30,
                encryption_algs=CIPHERS,
            )
        except hostkeys.HostKeyChanged as exc:
            logger.warning(
                "gateway: user %s from %s to instance %s: host key changed (pinned %s, offered %s), refused",
                self.verdict.user_id,
                self.peer,
                self.verdict.instance_id,
                exc.pinned,
                exc.offered,
            )
            # Written before the user is answered, so the log holds it by the time they read it.
            await self._log_host_key_changed(str(exc))
            raise

    async def _log_host_key_changed(self, reason: str) -> None:
        session_id = await self._session()
        if session_id is not None:
            await _db(gateway_session_host_key_changed)(session_id=session_id, reason=reason)

    def session_requested(self) -> asyncssh.SSHServerProcess:
        return PassThroughProcess(handle_process, None, 3, False)

    def refusal(self) -> str:
        """Why this connection goes no further: the verdict's message, or none."""
        if self.verdict is None:
            return _("Not signed in.")
        return self.verdict.refusal

    # --- channels --------------------------------------------------------------------------------------

    def connection_requested(self, dest_host: str, dest_port: int, orig_host: str, orig_port: int):
        """``ssh -L``: opened from the instance, as its sshd would (never from the gateway's host)."""
        if self.refusal():
            raise asyncssh.ChannelOpenError(asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED, self.refusal())
        if self.verdict.target.simulated:
            raise asyncssh.ChannelOpenError(
                asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED,
                _("The simulated cloud runs no real machine: there is nothing to forward a port to."),
            )

        async def tunnel():
            try:
                upstream = await self.upstream()
            except (OSError, asyncssh.Error, hostkeys.HostKeyChanged) as exc:
                raise asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED, _unreachable(exc)) from exc
            return await self.conn.forward_tunneled_connection(upstream, dest_host, dest_port)

        return tunnel()

    def server_requested(self, listen_host: str, listen_port: int) -> bool:
        return False  # remote forwarding (-R) would listen on the instance: not offered through the gateway


class PassThroughProcess(asyncssh.SSHServerProcess):
    """A session whose every subsystem goes to ``handle_process``: asyncssh would serve sftp itself (from
    an ``sftp_factory``) or refuse it, where the gateway must hand it to the instance's sshd.

    ``session_started`` is asyncssh's own (2.24, ``SSHServerStreamSession``) less its sftp and scp branches.
    """

    def subsystem_requested(self, subsystem: str) -> bool:
        return True

    def session_started(self) -> None:
        stdin = asyncssh.SSHReader(self, self._chan)
        stdout = asyncssh.SSHWriter(self, self._chan)
        stderr = asyncssh.SSHWriter(self, self._chan, asyncssh.EXTENDED_DATA_STDERR)
        self._conn.create_task(self._session_factory(stdin, stdout, stderr), stdin.logger)


def _close_upstream(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is None:
        task.result().close()


def _unreachable(exc: BaseException) -> str:
    if isinstance(exc, hostkeys.HostKeyChanged):
        return str(exc)
    if isinstance(exc, asyncssh.PermissionDenied):
        return _(
            "The gateway could not log in to the instance: it was launched before the gateway was enabled, "
            "or its authorized keys were changed. Release it and launch a new one, or use direct SSH."
        )
    return _("The instance's SSH server does not answer (%(error)s).") % {"error": exc}


async def handle_process(process: asyncssh.SSHServerProcess) -> None:
    """A shell, a command or a subsystem (sftp): joined to the same on the instance."""
    gateway: GatewayConnection = process.get_extra_info("gateway")
    refusal = gateway.refusal()
    if refusal:
        process.stderr.write((refusal + "\r\n").encode())
        process.exit(1)
        return
    if gateway.verdict.target.simulated:
        await shell.run(process, instance_id=gateway.verdict.instance_id, user=gateway.verdict.target.user)
        return
    try:
        upstream = await gateway.upstream()
    except (OSError, asyncssh.Error, hostkeys.HostKeyChanged) as exc:
        process.stderr.write((_unreachable(exc) + "\r\n").encode())
        process.exit(1)
        return
    term_type = process.term_type
    try:
        remote = await upstream.create_process(
            process.command,
            subsystem=process.subsystem,
            env=process.env,
            term_type=term_type,
            term_size=process.term_size if term_type else None,
            term_modes=process.term_modes if term_type else None,
            request_pty=bool(term_type),
            encoding=None,
        )
    except asyncssh.ChannelOpenError as exc:  # the instance's sshd refused the session (no such subsystem…)
        process.stderr.write((_("The instance refused: %(reason)s") % {"reason": exc.reason} + "\r\n").encode())
        process.exit(1)
        return
    # Big reads: the default (8 KB) costs a trip through the event loop per 8 KB of a copy.
    await remote.redirect(stdin=process.stdin, stdout=process.stdout, stderr=process.stderr, bufsize=256 * 1024)
    await remote.wait_closed()
    if remote.exit_signal:
        signal, core_dumped, message, language = remote.exit_signal
        process.exit_with_signal(signal, core_dumped, message, language)
    elif remote.exit_status is not None:
        process.exit(remote.exit_status)
    else:
        process.close()  # none was sent (an sftp server just closes): send none either


async def gateway_serve(*, host: str, port: int) -> asyncssh.SSHAcceptor:
    """Start listening; the caller keeps the loop running (``python -m gateway``, the tests)."""
    return await asyncssh.create_server(
        GatewayConnection,
        host,
        port,
        server_host_keys=[keys.host_key()],
        encoding=None,
        line_editor=False,  # pass keystrokes through: the instance's shell edits its own lines
        allow_scp=False,  # scp's legacy protocol runs as a command on the instance instead
        agent_forwarding=False,
        x11_forwarding=False,
        keepalive_interval=30,
        encryption_algs=CIPHERS,
        server_version="gpu-console-gateway",
    )
