"""``manage.py gateway``: run the SSH gateway until stopped (``python -m gateway`` is the same)."""

from __future__ import annotations

import asyncio
import signal

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from gateway.server import gateway_drain, gateway_serve


class Command(BaseCommand):
    help = "Run the SSH gateway: ssh -p GATEWAY_PORT <instance>@host reaches an instance on any backend."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default=settings.GATEWAY_BIND, help="address to listen on (GATEWAY_BIND)")
        parser.add_argument("--port", type=int, default=settings.GATEWAY_PORT, help="port (GATEWAY_PORT)")

    def handle(self, *args, host: str, port: int, **options) -> None:
        if not settings.GATEWAY_ENABLED:
            raise CommandError("GATEWAY_ENABLED is off: the SSH gateway does not run.")
        asyncio.run(self._serve(host, port))

    async def _serve(self, host: str, port: int) -> None:
        try:
            acceptor = await gateway_serve(host=host, port=port)
        except OSError as exc:
            raise CommandError(f"The SSH gateway cannot listen on {host}:{port}: {exc}") from exc
        self.stdout.write(f"SSH gateway listening on {host}:{port}")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
        acceptor.close()
        await acceptor.wait_closed()
        await gateway_drain()
        self.stdout.write("SSH gateway stopped")
