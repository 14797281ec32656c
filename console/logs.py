"""Logs that can be followed from a web request into the Celery tasks it enqueued.

``RequestIdMiddleware`` gives every request an id (the caller's ``X-Request-ID`` when it is a sane
token, else a new one), answers it in the same header, and keeps it in a context variable for the
request's life. A task published while it is set carries it in its headers (``before_task_publish``);
the worker sets it again, with the task's own id, while the task runs (``task_prerun``/``postrun``).
``ContextFilter`` puts both on every log record, and ``JsonFormatter`` writes one JSON object a line
(``LOG_FORMAT=json``) for a log pipeline; the plain format stays the default for people.

``RedactFilter`` takes secrets that travel in URLs out of the records of the loggers that write
request paths (uvicorn's access lines, ``django.request``; settings' ``LOGGING``): the proxy hand-off's
one-time ``token=``, share links' ``/s-<token>`` (a share link is its token: whoever reads the log
could open it), password-reset and e-mail confirmation keys. Other logs are left whole: the
development mailbox's line gives a confirmation link in full on purpose.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from contextvars import ContextVar
from datetime import UTC, datetime

from celery.signals import before_task_publish, task_postrun, task_prerun
from django.http import HttpRequest, HttpResponse

REQUEST_ID: ContextVar[str] = ContextVar("request_id", default="")
TASK_ID: ContextVar[str] = ContextVar("task_id", default="")
HEADER = "X-Request-ID"
_SANE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class RequestIdMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        sent = request.headers.get(HEADER, "")
        request_id = sent if _SANE.match(sent) else uuid.uuid4().hex
        request.request_id = request_id
        token = REQUEST_ID.set(request_id)
        try:
            response = self.get_response(request)
        finally:
            REQUEST_ID.reset(token)
        response[HEADER] = request_id
        return response


@before_task_publish.connect
def _carry_request_id(headers=None, **kwargs) -> None:
    request_id = REQUEST_ID.get()
    if request_id and headers is not None:
        headers.setdefault("request_id", request_id)


# What each running task changed, to put back when it ends: a worker runs many tasks one after the
# other in one context, and a task that carried no request id must not log the previous task's.
_ENTERED: ContextVar[tuple] = ContextVar("entered_tasks", default=())


@task_prerun.connect
def _enter_task(task_id=None, task=None, **kwargs) -> None:
    carried = getattr(getattr(task, "request", None), "request_id", None) if task is not None else None
    # In eager mode the request's own id is still set: kept when nothing was carried.
    request_token = REQUEST_ID.set(str(carried)) if carried else None
    task_token = TASK_ID.set(task_id or "")
    _ENTERED.set((*_ENTERED.get(), (request_token, task_token)))


@task_postrun.connect
def _leave_task(**kwargs) -> None:
    entered = _ENTERED.get()
    if not entered:
        TASK_ID.set("")
        return
    *rest, (request_token, task_token) = entered
    _ENTERED.set(tuple(rest))
    TASK_ID.reset(task_token)
    if request_token is not None:
        REQUEST_ID.reset(request_token)


class ContextFilter(logging.Filter):
    """Adds ``request_id`` and ``task_id`` (empty outside a request or a task) to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        record.task_id = TASK_ID.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (UTC, ISO 8601), level, logger, message, request and task ids,
    and the traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in ("request_id", "task_id"):
            value = getattr(record, name, "")
            if value:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


_SECRETS_IN_URLS = (
    # Query parameters that carry a credential: the hand-off's token, device and OAuth codes, keys.
    (re.compile(r"([?&](?:token|key|code|secret|signature)=)[^&\s\"']+", re.IGNORECASE), r"\1[redacted]"),
    # A port's share link, /i/<instance>/s-<32 base32 characters>/ (ports.proxy_targets.SHARE_SERVICE).
    (re.compile(r"(/s-)[a-z2-7]{32}(?![a-z2-7])"), r"\1[redacted]"),
    # allauth's password-reset and e-mail confirmation links.
    (re.compile(r"(/accounts/(?:password/reset/key|confirm-email)/)[^/\s\"'?]+"), r"\1[redacted]"),
)


def redact(text: str) -> str:
    """``text`` with the secrets that URLs carry replaced by ``[redacted]``."""
    for pattern, replacement in _SECRETS_IN_URLS:
        text = pattern.sub(replacement, text)
    return text


class RedactFilter(logging.Filter):
    """Redacts the message and its string arguments (uvicorn's access line passes the path as one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(arg) if isinstance(arg, str) else arg for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: redact(arg) if isinstance(arg, str) else arg for key, arg in record.args.items()}
        return True
