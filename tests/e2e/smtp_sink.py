"""A minimal SMTP server on 127.0.0.1 that keeps what it receives: the production console's mail goes
out over SMTP (EMAIL_HOST), as it would to a real relay, and the test reads the verification link here."""

from __future__ import annotations

import email
import email.policy
import socketserver
import threading
from email.message import EmailMessage


class _Handler(socketserver.StreamRequestHandler):
    def _say(self, line: str) -> None:
        self.wfile.write((line + "\r\n").encode())

    def handle(self) -> None:
        self._say("220 sink ESMTP")
        while True:
            raw = self.rfile.readline()
            if not raw:
                return
            command = raw.decode(errors="replace").strip()
            verb = command.split(" ", 1)[0].upper()
            if verb in ("EHLO", "HELO"):
                self._say("250 sink")
            elif verb in ("MAIL", "RCPT", "RSET", "NOOP"):
                self._say("250 OK")
            elif verb == "DATA":
                self._say("354 end with <CRLF>.<CRLF>")
                lines = []
                while True:
                    line = self.rfile.readline()
                    if line in (b".\r\n", b".\n", b""):
                        break
                    lines.append(line[1:] if line.startswith(b"..") else line)
                message = email.message_from_bytes(b"".join(lines), policy=email.policy.default)
                self.server.messages.append(message)  # type: ignore[attr-defined]
                self._say("250 queued")
            elif verb == "QUIT":
                self._say("221 bye")
                return
            else:
                self._say("502 not implemented")


class SMTPSink(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.messages: list[EmailMessage] = []
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.server_address[1]

    def body_of_last_to(self, address: str) -> str:
        for message in reversed(self.messages):
            if address in str(message["To"]):
                part = message.get_body(preferencelist=("plain",))
                return part.get_content() if part is not None else ""
        return ""

    def __enter__(self) -> SMTPSink:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()
