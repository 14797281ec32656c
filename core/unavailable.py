"""A dependency that is down answers 503 with ``Retry-After``, never a 500 with a traceback per request.

When PostgreSQL, Redis or the broker stops answering, every request that needs it fails with the
driver's error. Django would answer each with a 500 and log each with a traceback: hundreds of
"server errors" a minute for what is one outage, and clients that retry at once. Here:

- ``dependency_of`` tells an outage (no connection, the server shutting down) from an error of the
  request itself (a deadlock, a serialization failure, a timeout of one statement), which stay 500s;
- Django's ``got_request_exception`` marks the request, wherever the error rose (a view, the session
  or the acting-context middleware, the API), and ``DependencyUnavailableMiddleware``, outermost,
  answers 503 with ``Retry-After``: the API's one error format naming what is unavailable, or a plain
  page in the reader's language that needs neither the database nor a session to render;
- ``OutageLogFilter`` drops the per-request traceback; the middleware logs one line when a process
  first meets the outage and one when a request succeeds again.
"""

from __future__ import annotations

import logging
import sys
import threading
import time

import kombu.exceptions
import psycopg
import psycopg_pool
import redis.exceptions
from django.conf import settings
from django.core.signals import got_request_exception
from django.db import utils as db_utils
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

logger = logging.getLogger("console.outages")

# PostgreSQL's SQLSTATEs that mean the server, not the statement, is the problem: a connection error
# (class 08), the server shutting down or not yet accepting connections (57P01-57P03), no connection
# slot left (53300). A psycopg error without a SQLSTATE never reached a server.
_DATABASE_DOWN_STATES = ("08", "57P01", "57P02", "57P03", "53300")

DEPENDENCY_NAMES = {
    "database": gettext_lazy("the database"),
    "cache": gettext_lazy("the cache (Redis)"),
    "broker": gettext_lazy("the task queue (Redis)"),
}


def _database_down(error: BaseException) -> bool:
    if isinstance(error, psycopg_pool.PoolTimeout):
        return True
    if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
        state = getattr(error, "sqlstate", None)
        return state is None or state.startswith(_DATABASE_DOWN_STATES)
    return False


def dependency_of(error: BaseException | None) -> str | None:
    """``"database"``, ``"cache"`` or ``"broker"`` when ``error`` says that dependency is unreachable."""

    seen = 0
    while error is not None and seen < 5:  # the driver's error is often the cause of Django's or kombu's
        if isinstance(error, kombu.exceptions.OperationalError):
            return "broker"
        if isinstance(error, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError):
            return "cache"
        if isinstance(error, db_utils.InterfaceError) and error.__cause__ is None:
            return "database"  # Django's own "connection already closed"
        if _database_down(error):
            return "database"
        error = error.__cause__ or error.__context__
        seen += 1
    return None


def _mark(sender, request: HttpRequest | None = None, **kwargs) -> None:
    if request is not None:
        request.dependency_unavailable = dependency_of(sys.exc_info()[1])


class OutageLogFilter(logging.Filter):
    """Drops ``django.request``'s lines for a request that failed because a dependency is down: the
    traceback and the "Service Unavailable" line (the middleware logs the outage once instead)."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = getattr(record, "request", None)
        if request is not None and getattr(request, "dependency_unavailable", None):
            return False
        return not (record.exc_info and dependency_of(record.exc_info[1]))


class _Outages:
    """What this process has seen down, so that an outage is logged once and its end once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: dict[str, float] = {}

    def seen(self, dependency: str) -> None:
        with self._lock:
            if dependency in self._since:
                return
            self._since[dependency] = time.monotonic()  # wall-clock: how long the outage lasted, for the log
        logger.error("%s is unavailable: answering 503 until it is back", dependency)

    def over(self) -> None:
        if not self._since:  # the common path: nothing down, no lock
            return
        with self._lock:
            ended, self._since = self._since, {}
        for dependency, since in ended.items():
            logger.warning("%s is available again after %.0f s", dependency, time.monotonic() - since)


outages = _Outages()


def unavailable_response(request: HttpRequest, dependency: str) -> HttpResponse:
    """503 with ``Retry-After``: the API's error format, or a page in the reader's language."""
    retry_after = settings.CONSOLE_UNAVAILABLE_RETRY_AFTER_S
    language = translation.get_language_from_request(request)
    with translation.override(language):
        what = str(DEPENDENCY_NAMES.get(dependency, dependency))
        message = _("The console cannot reach %(what)s right now. Nothing was changed: try again shortly.") % {
            "what": what
        }
        if request.path.startswith("/api/") or "application/json" in request.headers.get("Accept", ""):
            response = JsonResponse(
                {"error": {"code": "unavailable", "message": message, "dependency": dependency}}, status=503
            )
        else:
            body = render_to_string(
                "503.html", {"message": message, "retry_after": retry_after, "LANGUAGE_CODE": language}
            )
            response = HttpResponse(body, status=503)
    response["Retry-After"] = str(retry_after)
    response["Cache-Control"] = "no-store"
    return response


class DependencyUnavailableMiddleware:
    """Outermost: turns a request that failed on a dependency that is down into a 503 (see the module)."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response
        got_request_exception.connect(_mark, dispatch_uid="core.unavailable")

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        dependency = getattr(request, "dependency_unavailable", None)
        if dependency:
            outages.seen(dependency)
            return unavailable_response(request, dependency)
        if response.status_code < 500:
            outages.over()
        return response
