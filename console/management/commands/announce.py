"""Wait until the web process answers, then print where the console is (used by `make run`).

It stays up afterwards because honcho stops every process when one of them exits.
"""

from __future__ import annotations

import os
import signal
import time
import urllib.request

from django.core.management.base import BaseCommand

from console.mail import mailbox_active
from console.management.commands.seed_demo import DEMO_STAFF_EMAIL


class Command(BaseCommand):
    help = "Print the console's URL and demo credentials once the web server is up."

    def add_arguments(self, parser) -> None:
        parser.add_argument("url")
        parser.add_argument("--timeout", type=float, default=120.0)

    def handle(self, *args, url: str, timeout: float, **options) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url.rstrip("/") + "/healthz", timeout=2) as response:  # noqa: S310 (our own URL)
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        else:
            self.stderr.write(f"The web server did not answer at {url} within {timeout:.0f} s.")
            return
        password = os.environ.get("CONSOLE_DEMO_PASSWORD", "gpu-console-demo")
        if mailbox_active():
            mail = "  Mail       " + url.rstrip("/") + "/dev/mail/ (sign-up verification links too)"
        else:
            mail = "  Sign-up    verification e-mails are printed in this log (web.1)"
        lines = [
            "GPU Console is running",
            "",
            f"  Open       {url}",
            f"  Staff      {DEMO_STAFF_EMAIL} / {password}",
            mail,
            "  API docs   " + url.rstrip("/") + "/api/docs/",
            "",
            "Ctrl-C stops web, worker and beat.",
        ]
        width = max(len(line) for line in lines) + 4
        self.stdout.write("┌" + "─" * width + "┐")
        for line in lines:
            self.stdout.write("│  " + line.ljust(width - 2) + "│")
        self.stdout.write("└" + "─" * width + "┘")
        self.stdout.flush()
        while True:
            signal.pause()
