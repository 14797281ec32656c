"""The SDK's machinery: errors, retries, idempotency keys, pagination, and the ``operation`` decorator
that turns a typed method signature into one call of the console's REST API (``/api/v1/``).

Every non-2xx answer becomes an :class:`ApiError` (a subclass per status) carrying the console's one
error body (``{"error": {"code", "message", "fields"}}``), so callers branch on ``code``, never on text.
A 429 or 503 is retried with exponential backoff, waiting at least what ``Retry-After`` says (a
console that cannot be reached at all is reported at once: ``Unavailable`` with status 0). Every POST carries an
``Idempotency-Key`` (random, or the caller's ``idempotency_key=``), so a retry never creates twice.
"""

from __future__ import annotations

import email.utils
import functools
import inspect
import random
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

API = "/api/v1"
RETRY_STATUSES = (429, 503)


class ApiError(Exception):
    """The console refused (4xx/5xx) or could not be reached (``status`` 0, code ``unreachable``)."""

    def __init__(self, status: int, code: str, message: str, fields: dict | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.fields = status, code, message, fields or {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.status}, {self.code!r}, {self.message!r})"

    @classmethod
    def from_response(cls, response: httpx.Response) -> ApiError:
        kind = ERRORS.get(response.status_code, ServerError if response.status_code >= 500 else ApiError)
        try:
            error = response.json()["error"]
            return kind(response.status_code, error.get("code", "error"), error.get("message", ""), error.get("fields"))
        except (ValueError, KeyError, TypeError, AttributeError):
            return kind(response.status_code, "http_error", f"HTTP {response.status_code}")


class BadRequest(ApiError):
    """400: ``fields`` says which values were refused and why."""


class Unauthorized(ApiError):
    """401: no token, or one that is not valid (revoked, expired)."""


class Forbidden(ApiError):
    """403: the token may not do this (``read_only_token``, a team role)."""


class NotFound(ApiError):
    """404: no such object, or another account's."""


class Conflict(ApiError):
    """409: a business rule refused it (``code`` says which: ``insufficient_funds``, ``quota_exceeded``…)."""


class TooLarge(ApiError):
    """413: a body or a file over a limit (``volume_full``, ``too_large``)."""


class RateLimited(ApiError):
    """429 after every retry: slow down."""


class ServerError(ApiError):
    """5xx other than 503."""


class Unavailable(ApiError):
    """503 after every retry (a dependency down), or the console unreachable (``status`` 0)."""


ERRORS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: TooLarge,
    429: RateLimited,
    503: Unavailable,
}


def retry_after_s(response: httpx.Response) -> float | None:
    """``Retry-After`` in seconds (a number or an HTTP date), or None without one."""
    value = response.headers.get("Retry-After", "").strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


@dataclass(frozen=True)
class Operation:
    """What a method of the SDK calls: the schema's ``operationId``, the method and the path."""

    operation_id: str
    method: str
    path: str
    paginated: bool = False
    stream: bool = False


def operation(operation_id: str, method: str, path: str, *, paginated: bool = False, stream: bool = False):
    """Make the decorated method call ``method path``: the parameters named in ``path`` fill it, ``body``
    is the JSON body, ``content`` the raw body, ``idempotency_key`` the header, every other keyword a
    query parameter (left out when None). The method's own body is never run: its signature and return
    annotation are the typed contract, checked against the schema by the tests."""
    spec = Operation(operation_id, method, path, paginated, stream)
    path_names = re.findall(r"{(\w+)}", path)

    def decorate(func: Callable) -> Callable:
        signature = inspect.signature(func)

        @functools.wraps(func)
        def call(self: Transport, *args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            values = dict(bound.arguments)
            values.pop("self")
            url = path.format(**{name: quote(str(values.pop(name)), safe="") for name in path_names})
            body, content = values.pop("body", None), values.pop("content", None)
            key = values.pop("idempotency_key", None)
            params = {k: _query_value(v) for k, v in values.items() if v is not None}
            if paginated:
                return self._pages(url, params)
            if stream:
                return self._stream(url, params)
            headers = {"Idempotency-Key": key or str(uuid.uuid4())} if method == "POST" else {}
            if content is not None:
                headers["Content-Type"] = "application/octet-stream"
            return self._call(method, url, params=params, json=body, content=content, headers=headers)

        call.operation = spec  # type: ignore[attr-defined]
        return call

    return decorate


def _query_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


class Transport:
    """One console, one token: the HTTP session, with retries on 429/503 that honour ``Retry-After``."""

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        timeout: float = 30.0,
        max_retries: int = 5,
        backoff_s: float = 0.5,
        max_wait_s: float = 60.0,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = url.rstrip("/")
        self.max_retries, self.backoff_s, self.max_wait_s, self._sleep = max_retries, backoff_s, max_wait_s, sleep
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(base_url=self.url + API, headers=headers, timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _wait(self, attempt: int, response: httpx.Response) -> None:
        # Full jitter, so many clients told to wait do not come back in one burst; never less than Retry-After.
        backoff = random.uniform(0, self.backoff_s * 2**attempt)
        told = retry_after_s(response)
        self._sleep(min(self.max_wait_s, max(backoff, told or 0.0)))

    def _send(self, method: str, path: str, *, stream: bool = False, **kwargs: Any) -> httpx.Response:
        attempt = 0
        while True:
            try:
                request = self._http.build_request(method, path, **kwargs)
                response = self._http.send(request, stream=stream)
            except httpx.HTTPError as exc:
                raise Unavailable(0, "unreachable", f"{self.url}: {exc}") from exc
            if response.status_code in RETRY_STATUSES and attempt < self.max_retries:
                response.close()
                self._wait(attempt, response)
                attempt += 1
                continue
            if response.status_code >= 400:
                if stream:
                    response.read()
                    response.close()
                raise ApiError.from_response(response)
            return response

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        kwargs = {k: v for k, v in kwargs.items() if v is not None and v != {}}
        response = self._send(method, path, **kwargs)
        return response.json() if response.content else None

    def _pages(self, path: str, params: dict) -> Iterator[Any]:
        """Every item of a paginated list, fetched a page at a time as the caller iterates."""
        page = 1
        while True:
            body = self._call("GET", path, params={**params, "page": page, "page_size": 100})
            if isinstance(body, list):  # an endpoint documented as paginated that answers a plain list
                yield from body
                return
            yield from body["results"]
            if not body.get("next"):
                return
            page += 1

    def _stream(self, path: str, params: dict) -> Iterator[bytes]:
        """A download's bytes, as they arrive."""
        response = self._send("GET", path, params=params, stream=True)
        try:
            yield from response.iter_bytes()
        finally:
            response.close()


def _anonymous(url: str, path: str, body: dict, timeout: float) -> dict:
    with Transport(url, None, timeout=timeout) as transport:
        return transport._call("POST", path, json=body, headers={"Idempotency-Key": str(uuid.uuid4())})


def device_login_start(url: str, client_name: str, *, scope: str = "full", timeout: float = 30.0) -> dict:
    """Start a browser log-in: ``{device_code, user_code, verification_uri_complete, interval, …}``.

    ``scope="read"`` asks for a read-only token (GET only: it cannot launch, stop or spend).
    """
    return _anonymous(url, "/account/device/", {"client_name": client_name, "scope": scope}, timeout)


def device_login_poll(url: str, device_code: str, *, timeout: float = 30.0) -> str:
    """The token once the user confirmed; ``Conflict`` (``authorization_pending``) until then."""
    return _anonymous(url, "/account/device/token/", {"device_code": device_code}, timeout)["token"]
