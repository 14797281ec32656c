"""The development texts inbox: the SMS the console would send, kept where a developer can read them.

The counterpart of the development mailbox (``console/mail.py``): ``DevTextsSender`` is the default
``IDENTITY_SMS_SENDER`` outside production and writes each text as a small JSON file under
``IDENTITY_DEV_TEXTS_DIR`` (``var/texts/``), which web and worker share; it logs one line with the code.
``/dev/texts/`` lists them newest first (development and demo consoles only; 404 elsewhere), and a
phone form links to it while texts go there, so a demo shows its codes as it shows its mail.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.utils.translation import gettext as _

from identity.normalise import phone_mask
from identity.sms.base import SentText, SmsSender

logger = logging.getLogger(__name__)

BACKEND = "identity.sms.dev.DevTextsSender"
KEEP = 500
_KEY = re.compile(r"^\d{20}-[0-9a-f]{8}$")


def texts_dir() -> Path:
    return Path(getattr(settings, "IDENTITY_DEV_TEXTS_DIR", None) or Path(settings.VAR_DIR) / "texts")


def inbox_active() -> bool:
    """Texts go to the development inbox now (so phone forms may point at it)."""
    from_settings = getattr(settings, "IDENTITY_SMS_SENDER", {}).get("BACKEND")
    return not getattr(settings, "PRODUCTION", False) and from_settings == BACKEND


@dataclass(frozen=True)
class StoredText:
    key: str
    number: str
    body: str
    code: str
    sent_at: datetime


def text_body(*, code: str, ttl_minutes: int) -> str:
    """The words a real template says (the providers' templates are approved with the same sense)."""
    return _("Your verification code is %(code)s. It expires in %(minutes)d minutes. Do not share it.") % {
        "code": code,
        "minutes": ttl_minutes,
    }


class DevTextsSender(SmsSender):
    """Store every text in the development inbox and log it; sends nothing anywhere."""

    label = "development texts inbox"

    def send_code(self, *, number: str, code: str, purpose: str, ttl_minutes: int) -> SentText:
        folder = texts_dir()
        folder.mkdir(parents=True, exist_ok=True)
        key = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
        record = {
            "number": number,
            "code": code,
            "purpose": purpose,
            "body": text_body(code=code, ttl_minutes=ttl_minutes),
        }
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".incoming-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump(record, handle, ensure_ascii=False)
            os.replace(tmp, folder / f"{key}.json")  # whole or not at all, for a reader in another process
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        logger.info("Text to %s: code %s (dev texts inbox: /dev/texts/)", phone_mask(number), code)
        for old in _files()[KEEP:]:
            old.unlink(missing_ok=True)
        return SentText(reference=key)


def _files() -> list[Path]:
    folder = texts_dir()
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.glob("*.json") if _KEY.match(p.stem)), reverse=True)


def texts_list(*, limit: int = 100) -> list[StoredText]:
    """The newest ``limit`` texts, newest first."""
    found = []
    for path in _files()[:limit]:
        try:
            record = json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            continue
        sent_at = datetime.fromtimestamp(int(path.stem[:20]) / 1e9, tz=UTC)
        found.append(StoredText(path.stem, record["number"], record["body"], record["code"], sent_at))
    return found
