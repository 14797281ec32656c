"""A thin typed client of the console's REST API (``/api/v1/``), used by the command line.

Every non-2xx answer becomes an :class:`ApiError` carrying the console's one error body
(``{"error": {"code", "message", "fields"}}``), so callers branch on ``code``, never on text.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx

API = "/api/v1"
INSTANCE_VERBS = ("start", "stop", "restart", "release")


class ApiError(Exception):
    """The console refused (4xx/5xx) or could not be reached (``status`` 0, code ``unreachable``)."""

    def __init__(self, status: int, code: str, message: str, fields: dict | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.fields = status, code, message, fields or {}

    @classmethod
    def from_response(cls, response: httpx.Response) -> ApiError:
        try:
            error = response.json()["error"]
            return cls(response.status_code, error.get("code", "error"), error.get("message", ""), error.get("fields"))
        except (ValueError, KeyError, TypeError):
            return cls(response.status_code, "http_error", f"HTTP {response.status_code}")


def device_login_start(url: str, client_name: str, *, scope: str = "full", timeout: float = 30.0) -> dict:
    """Start a browser log-in: ``{device_code, user_code, verification_uri_complete, interval, …}``.

    ``scope="read"`` asks for a read-only token (GET only: it cannot launch, stop or spend).
    """
    return _anonymous(url, "/account/device/", {"client_name": client_name, "scope": scope}, timeout)


def device_login_poll(url: str, device_code: str, *, timeout: float = 30.0) -> str:
    """The token once the user confirmed; ``ApiError`` (409 ``authorization_pending`` until then)."""
    return _anonymous(url, "/account/device/token/", {"device_code": device_code}, timeout)["token"]


def _anonymous(url: str, path: str, body: dict, timeout: float) -> dict:
    try:
        response = httpx.post(url.rstrip("/") + API + path, json=body, timeout=timeout)
    except httpx.HTTPError as exc:
        raise ApiError(0, "unreachable", f"{url}: {exc}") from exc
    if response.status_code >= 400:
        raise ApiError.from_response(response)
    return response.json()


class Client:
    """One console, one token. ``Client("https://console.example", "tok_…")``."""

    def __init__(self, url: str, token: str, *, timeout: float = 30.0, transport: httpx.BaseTransport | None = None):
        self.url = url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.url + API,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=timeout,
            transport=transport,
        )

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(0, "unreachable", f"{self.url}: {exc}") from exc
        if response.status_code >= 400:
            raise ApiError.from_response(response)
        return response.json() if response.content else None

    def _create(self, path: str, body: dict, idempotency_key: str | None) -> dict:
        # Every create carries a key: a retry after a lost answer returns the first object, never a second.
        headers = {"Idempotency-Key": idempotency_key or str(uuid.uuid4())}
        return self._call("POST", path, json=body, headers=headers)

    def _all(self, path: str, params: dict | None = None) -> list[dict]:
        rows: list[dict] = []
        page = 1
        while True:
            body = self._call("GET", path, params={**(params or {}), "page": page, "page_size": 100})
            rows += body["results"]
            if not body.get("next"):
                return rows
            page += 1

    # --- account and money ---------------------------------------------------------------------------
    def profile(self) -> dict:
        return self._call("GET", "/account/profile/")

    def balance(self) -> dict:
        return self._call("GET", "/billing/balance/")

    def statement(self, month: str) -> dict:
        """``month``: YYYY-MM. Usage lines and the month's summary."""
        return self._call("GET", f"/billing/statements/{month}/")

    def quota(self) -> list[dict]:
        return self._call("GET", "/quota/")

    def quota_request(self, *, gpu_model: str, cards: int, duration_days: int, reason: str) -> dict:
        body = {"gpu_model": gpu_model, "cards": cards, "duration_days": duration_days, "reason": reason}
        return self._call("POST", "/quota/requests/", json=body)

    def catalogue(self) -> dict:
        return self._call("GET", "/catalogue/")

    # --- instances -----------------------------------------------------------------------------------
    def instances(self, *, status: list[str] | None = None, released: bool = False) -> list[dict]:
        params: dict[str, Any] = {"status": status or []}
        if released:
            params["released"] = "true"
        return self._all("/instances/", params)

    def instance(self, instance_id: str) -> dict:
        return self._call("GET", f"/instances/{instance_id}/")

    def launch(self, *, idempotency_key: str | None = None, **body: Any) -> dict:
        return self._create("/instances/", {k: v for k, v in body.items() if v is not None}, idempotency_key)

    def instance_action(self, instance_id: str, verb: str) -> dict:
        """``verb``: one of ``INSTANCE_VERBS``."""
        if verb not in INSTANCE_VERBS:
            raise ValueError(verb)
        return self._call("POST", f"/instances/{instance_id}/{verb}/")

    def resize(self, instance_id: str, *, node_count: int) -> dict:
        """Grow or shrink a running cluster to ``node_count`` whole nodes."""
        return self._call("POST", f"/instances/{instance_id}/resize/", json={"node_count": node_count})

    def events(self, instance_id: str) -> list[dict]:
        return self._call("GET", f"/instances/{instance_id}/events/")

    # --- apps, volumes -------------------------------------------------------------------------------
    def deploy(self, *, idempotency_key: str | None = None, **body: Any) -> dict:
        return self._create("/deployments/", {k: v for k, v in body.items() if v is not None}, idempotency_key)

    def deployments(self) -> list[dict]:
        return self._all("/deployments/")

    def volumes(self) -> list[dict]:
        return self._all("/volumes/")
