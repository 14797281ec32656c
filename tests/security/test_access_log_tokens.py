"""Share and hand-off tokens are not written to access logs (issue #24).

A share link is its token, and the proxy hand-off's token signs a browser in: whoever reads the logs
must not find them there. uvicorn's access lines go through the console's handler, which redacts them.
"""

from __future__ import annotations

import logging
import logging.config
import re
from pathlib import Path

import pytest
import uvicorn
from django.conf import settings

SHARE = "abcdefghijklmnopqrstuvwxyz234567"
HANDOFF = "eyJ1IjoxLCJuIjoiQUJDIiwicCI6Ii9pLyJ9:1vQx9Z:sig-part"


@pytest.fixture(autouse=True)
def _logging_as_in_production():
    """As a web process starts: uvicorn configures its loggers, then loads the console, whose
    ``django.setup`` applies ``LOGGING`` (other tests here may have started uvicorn since)."""
    uvicorn.Config("console.asgi:application")  # configures uvicorn's logging, as its command line does
    logging.config.dictConfig(settings.LOGGING)
    yield
    logging.config.dictConfig(settings.LOGGING)


def access_line(path: str) -> str:
    """One access line as uvicorn logs it (its logger, message and arguments), formatted and
    filtered by the handlers that logger has in a web process."""
    logger = logging.getLogger("uvicorn.access")
    record = logger.makeRecord(
        logger.name,
        logging.INFO,
        __file__,
        0,
        '%s - "%s %s HTTP/%s" %d',
        ("203.0.113.9:5000", "GET", path, "1.1", 200),
        None,
    )
    assert logger.handlers, "uvicorn's access logger writes through no handler of the console's"
    assert logger.filter(record)  # the logger's own filters, as Logger.handle applies them
    lines = []
    for handler in logger.handlers:
        assert handler.filter(record)
        lines.append(handler.format(record))
    return "\n".join(lines)


def test_the_access_log_does_not_hold_a_hand_off_token():
    line = access_line(f"/i/_handoff?token={HANDOFF}")
    assert HANDOFF not in line and "sig-part" not in line
    assert "/i/_handoff?token=[redacted]" in line


def test_the_access_log_does_not_hold_a_share_link_s_token():
    line = access_line(f"/i/2b1f0d3c-0000-4000-8000-000000000000/s-{SHARE}/index.html")
    assert SHARE not in line
    assert "/s-[redacted]/index.html" in line


def test_password_reset_keys_are_redacted_too():
    assert "k3y" not in access_line("/accounts/password/reset/key/1a-k3y/")


def test_django_s_request_log_redacts_a_share_link_s_token(caplog):
    logging.getLogger("django.request").warning("Not Found: %s", f"/i/2b1f/s-{SHARE}/", extra={"status_code": 404})
    assert SHARE not in caplog.text and "/s-[redacted]/" in caplog.text


def test_nginx_logs_no_query_and_masks_share_tokens():
    conf = (Path(__file__).resolve().parents[2] / "deploy" / "nginx.conf").read_text()
    assert re.search(r"access_log \S+ console;", conf)
    log_format = conf[conf.index("log_format console") :].split(";", 1)[0]
    assert "$request " not in log_format and "$request_uri" not in log_format and "$args" not in log_format
    assert "$console_logged_uri" in log_format and "[redacted]" in conf
