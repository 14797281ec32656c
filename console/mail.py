"""A local mailbox for development: the mail the console would send, kept where a developer can read it.

``DevMailboxBackend`` is the default ``EMAIL_BACKEND`` when ``CONSOLE_ENV=development`` and no
``EMAIL_HOST`` is set. It writes each message as an ``.eml`` file under ``CONSOLE_DEV_MAILBOX_DIR``
(``var/mail/``): the web server and the Celery worker are separate processes, and a directory is what
they already share on one host (no table, so no migration, and a mail client opens the files too). It
also logs one line per message with its subject and every link whole, where the console backend
printed a quoted-printable body with the verification link split across lines.

``/dev/mail/`` (``console.views.dev_mailbox``) lists the messages, newest first, and shows one with
its links clickable. It answers only in development (404 otherwise) and is not routed in production.
"""

from __future__ import annotations

import email
import logging
import os
import re
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from email import policy
from email.utils import getaddresses, parsedate_to_datetime
from pathlib import Path

from django.conf import settings
from django.core.mail.backends.base import BaseEmailBackend
from django.utils.html import strip_tags

logger = logging.getLogger(__name__)

BACKEND = "console.mail.DevMailboxBackend"
KEEP = 500  # the newest messages kept; older ones are deleted as new ones arrive
_KEY = re.compile(r"^\d{20}-[0-9a-f]{8}$")
_LINK = re.compile(r"https?://[^\s<>\"']+")


def dev_pages_enabled() -> bool:
    """The development-only pages answer: DEBUG or ``CONSOLE_ENV=development``, never in production."""
    return not getattr(settings, "PRODUCTION", False) and (settings.DEBUG or settings.CONSOLE_ENV == "development")


def mailbox_active() -> bool:
    """Mail goes to the local mailbox (so pages that say "check your inbox" may point at it)."""
    return dev_pages_enabled() and settings.EMAIL_BACKEND == BACKEND


def mailbox_dir() -> Path:
    return Path(getattr(settings, "CONSOLE_DEV_MAILBOX_DIR", None) or Path(settings.VAR_DIR) / "mail")


def links_in(text: str) -> list[str]:
    """Every http(s) link in ``text``, whole, in order, each once (trailing punctuation is prose)."""
    seen: dict[str, None] = {}
    for match in _LINK.finditer(text):
        seen.setdefault(match.group(0).rstrip(".,;:!?)]}"), None)
    return list(seen)


@dataclass(frozen=True)
class StoredMail:
    """One message in the mailbox; ``key`` names its file and sorts by arrival."""

    key: str
    subject: str
    sender: str
    to: list[str]
    date: datetime | None
    text: str
    links: list[str]


class DevMailboxBackend(BaseEmailBackend):
    """Store every message in the local mailbox and log a one-line notice; sends nothing anywhere.

    Safe from several processes at once: a message is written to a temporary file and renamed into
    place, so a reader never sees half of one, and names (arrival time, then random) never collide.
    """

    def send_messages(self, email_messages) -> int:
        sent = 0
        for message in email_messages or ():
            try:
                key = self._store(message)
            except OSError:
                if not self.fail_silently:
                    raise
                logger.warning("The development mailbox could not store a message", exc_info=True)
                continue
            self._announce(key, message)
            sent += 1
        if sent:
            _prune()
        return sent

    def _store(self, message) -> str:
        folder = mailbox_dir()
        folder.mkdir(parents=True, exist_ok=True)
        key = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".incoming-", suffix=".eml")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(message.message().as_bytes())
            os.replace(tmp, folder / f"{key}.eml")
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return key

    def _announce(self, key: str, message) -> None:
        # One line, nothing wrapped: the link can be copied (or clicked in a terminal) as it is.
        subject = " ".join(str(message.subject).split())
        links = links_in(message.body or "")
        base = "http://{}:{}".format(
            os.environ.get("CONSOLE_HOST", "127.0.0.1"), os.environ.get("CONSOLE_PORT", "8000")
        )
        logger.info(
            "Mail to %s: %s%s (dev mailbox: %s/dev/mail/%s/)",
            ", ".join(message.recipients()),
            subject,
            "".join(f" {link}" for link in links),
            base,
            key,
        )


def _files() -> list[Path]:
    """The stored messages' files, newest first (a message still being written is not one yet)."""
    folder = mailbox_dir()
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.glob("*.eml") if _KEY.match(p.stem)), reverse=True)


def _prune() -> None:
    for path in _files()[KEEP:]:
        path.unlink(missing_ok=True)


def _read(path: Path) -> StoredMail:
    parsed = email.message_from_bytes(path.read_bytes(), policy=policy.default)
    body = parsed.get_body(preferencelist=("plain",))
    if body is not None:
        text = body.get_content()
    else:
        html = parsed.get_body(preferencelist=("html",))
        text = strip_tags(html.get_content()) if html is not None else ""
    try:
        date = parsedate_to_datetime(parsed["date"]) if parsed["date"] else None
    except (TypeError, ValueError):
        date = None
    return StoredMail(
        key=path.stem,
        subject=" ".join(str(parsed["subject"] or "").split()),
        sender=str(parsed["from"] or ""),
        to=[address for _, address in getaddresses([str(v) for v in parsed.get_all("to", [])])],
        date=date,
        text=text,
        links=links_in(text),
    )


def mailbox_list(*, limit: int = 100) -> list[StoredMail]:
    """The newest ``limit`` messages, newest first."""
    mails = []
    for path in _files()[:limit]:
        try:
            mails.append(_read(path))
        except FileNotFoundError:  # pruned by another process meanwhile
            continue
    return mails


def mailbox_get(*, key: str) -> StoredMail | None:
    """One message by its key; None for an unknown key or one that is not a key at all."""
    if not _KEY.match(key):
        return None
    path = mailbox_dir() / f"{key}.eml"
    try:
        return _read(path)
    except FileNotFoundError:
        return None
