"""The REST transport to Slurm: slurmrestd with JWT, in the newest API version both sides speak.

The first call asks the server's OpenAPI document which versions it serves
(``providers.slurm.openapi``) and keeps the answer for the backend's life (a restarted server that
now answers 404 to the version kept is asked again); ``REST_API`` pins one instead.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from pathlib import Path

import httpx
from django.core.exceptions import ImproperlyConfigured

from providers.base import PermanentBackendError, TransientBackendError
from providers.slurm import openapi
from providers.slurm.openapi import Dialect
from providers.slurm.records import TRANSIENT_ERROR, job_record, node_record
from providers.slurm.tenants import jwt_mint


class SlurmRest:
    """slurmrestd with JWT: ``X-SLURM-USER-NAME`` and ``X-SLURM-USER-TOKEN``.

    Reads (jobs, nodes, the OpenAPI document) go as ``user`` (``REST_USER``: an unprivileged account,
    never root). A job is submitted, and cancelled, as its tenant: slurmrestd runs a job as the user
    the token names (only root or SlurmUser may name another in ``user_id``), so the console needs a
    token per tenant. It mints them with the cluster's JWT key (``JWT_KEY_FILE``,
    ``providers.slurm.tenants.jwt_mint``), or runs ``JWT_COMMAND`` with ``{user}`` in it replaced
    (``scontrol token username={user}``, as root or SlurmUser); a fixed ``JWT_TOKEN`` serves
    ``REST_USER`` only. A token is minted again when it nears its end or slurmrestd refuses it.

    ``api``: a version to speak (``"v0.0.41"``), or ``""`` to take the newest the server offers.
    """

    def __init__(
        self,
        *,
        url: str,
        user: str,
        token: str = "",
        token_command: list[str] | None = None,
        token_lifespan: int = 3600,
        jwt_key_file: str = "",
        api: str = "",
        slurm_conf: str = "",
        timeout: float = 15.0,
    ) -> None:
        if api and api not in openapi.SUPPORTED:
            raise ImproperlyConfigured(
                f"REST_API {api!r} is not a slurmrestd version the console speaks ({', '.join(openapi.SUPPORTED)}); "
                "leave it empty to use the newest the server offers."
            )
        self.url = url.rstrip("/")
        self.pinned = api
        self.user = user
        self.fixed_token = token
        self.token_command = list(token_command or [])
        self.token_lifespan = token_lifespan
        self.jwt_key_file = jwt_key_file
        self.env = {**os.environ, **({"SLURM_CONF": slurm_conf} if slurm_conf else {})}
        self.timeout = timeout
        self._tokens: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()
        self._dialect: Dialect | None = Dialect(api) if api else None

    def token(self, user: str = "", *, fresh: bool = False) -> str:
        user = user or self.user
        if self.fixed_token and user == self.user:
            return self.fixed_token
        with self._lock:
            token, until = self._tokens.get(user, ("", 0.0))
            if fresh or not token or time.time() > until:
                token, lifespan = self._mint(user)
                until = time.time() + max(30, lifespan - 60)
                self._tokens[user] = (token, until)
            return token

    def _mint(self, user: str) -> tuple[str, int]:
        if self.jwt_key_file:
            try:
                key = Path(self.jwt_key_file).read_bytes()
            except OSError as exc:
                raise PermanentBackendError(f"The Slurm backend cannot read JWT_KEY_FILE: {exc.strerror}.") from exc
            return jwt_mint(key=key, user=user, lifespan=self.token_lifespan), self.token_lifespan
        if not self.token_command:
            raise PermanentBackendError("The Slurm backend has REST_URL but neither JWT_KEY_FILE nor JWT_COMMAND.")
        templated = any("{user}" in part for part in self.token_command)
        if user != self.user and not templated:
            raise PermanentBackendError(
                "Jobs run as each tenant's own user: give the Slurm backend JWT_KEY_FILE, or a JWT_COMMAND "
                "with {user} in it (scontrol token username={user})."
            )
        command = [part.replace("{user}", user) for part in self.token_command]
        try:
            out = subprocess.run(  # noqa: S603 (the operator's configured command)
                command, capture_output=True, text=True, env=self.env, timeout=self.timeout, check=True
            ).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            raise TransientBackendError(f"Could not get a Slurm token: {exc}") from exc
        lifespan = self.token_lifespan
        match = re.search(r"lifespan=(\d+)", " ".join(command))
        if match:
            lifespan = int(match[1])
        return out.strip().split("=", 1)[-1], lifespan

    # --- the version ---------------------------------------------------------------------------------

    def dialect(self) -> Dialect:
        """The API version to speak: ``REST_API``, or the newest one the server's OpenAPI document
        offers that the console speaks (asked once, then kept)."""
        if self._dialect is None:
            document = self._openapi_document()
            version = openapi.choose(document)
            if version is None:
                raise PermanentBackendError(
                    "slurmrestd offers none of the API versions the console speaks "
                    f"({', '.join(openapi.SUPPORTED)}); it offers "
                    f"{', '.join(sorted(openapi.offered(document))) or 'none'}."
                )
            self._dialect = Dialect(version)
        return self._dialect

    def _openapi_document(self) -> dict:
        """The server's OpenAPI document, from the first path that answers one."""
        for path in openapi.OPENAPI_PATHS:
            response = self._send("GET", f"{self.url}{path}", user=self.user)
            if response.status_code == 404:
                continue
            document = self._json(response)
            self._raise_for(response, "GET", path, document)
            return document
        raise PermanentBackendError(
            f"slurmrestd at {self.url} serves no OpenAPI document ({', '.join(openapi.OPENAPI_PATHS)})."
        )

    # --- requests ------------------------------------------------------------------------------------

    def _send(self, method: str, url: str, body: dict | None = None, *, user: str) -> httpx.Response:
        """One request as ``user``; an expired or refused token is minted again once."""
        for attempt in range(2):
            headers = {"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": self.token(user, fresh=attempt > 0)}
            try:
                response = httpx.request(method, url, json=body, headers=headers, timeout=self.timeout)
            except httpx.HTTPError as exc:
                raise TransientBackendError(f"slurmrestd did not answer: {exc}") from exc
            if response.status_code in (401, 403) and attempt == 0 and not self.fixed_token:
                continue  # an expired token: mint another once
            break
        return response

    @staticmethod
    def _json(response: httpx.Response) -> dict:
        try:
            data = response.json()
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    @staticmethod
    def _raise_for(response: httpx.Response, method: str, path: str, data: dict) -> None:
        """A refusal is permanent, the server's trouble transient. slurmrestd answers a Slurm error
        (an unknown job, a refused submission) with HTTP 500 and the error in the body, in every
        version: that is Slurm saying no, unless the error itself says to try again."""
        errors = openapi.errors(data)
        busy = [e for e in errors if TRANSIENT_ERROR.search(e)]
        if response.status_code == 429 or (response.status_code >= 500 and (busy or not errors)):
            raise TransientBackendError(f"slurmrestd answered {response.status_code}: {(busy or [''])[0]}".rstrip(": "))
        if response.status_code >= 400 or errors:
            detail = errors[0] if errors else response.text[:200]
            raise PermanentBackendError(f"slurmrestd refused {method} {path}: {detail}")

    def _request(self, method: str, path: str, body: dict | None = None, *, user: str = "") -> dict:
        dialect = self.dialect()
        url = f"{self.url}{dialect.path(path)}"
        response = self._send(method, url, body, user=user or self.user)
        if response.status_code == 404 and not self.pinned and path in ("/jobs", "/nodes", "/job/submit"):
            # The server no longer serves the version kept (upgraded while the console ran): the next
            # call asks its OpenAPI document again, and the task's retry writes in the new version.
            self._dialect = None
            raise TransientBackendError(f"slurmrestd no longer serves {dialect.version}; asking it which it does")
        data = self._json(response)
        self._raise_for(response, method, dialect.path(path), data)
        return data

    # --- the operations --------------------------------------------------------------------------------

    def submit(self, *, script: str, job: dict) -> int:
        body = self.dialect().submit_body(script=script, job=job)
        data = self._request("POST", "/job/submit", body, user=job.get("user") or "")
        job_id = Dialect.submitted_id(data)
        if job_id is None:
            raise TransientBackendError("slurmrestd gave no job id")
        return job_id

    def jobs(self) -> list[dict]:
        return [job_record(j) for j in self._request("GET", "/jobs").get("jobs") or [] if isinstance(j, dict)]

    def cancel(self, job_id: int, *, user: str = "") -> None:
        """Cancel as the job's own user (``REST_USER`` is no operator: it may cancel no one else's)."""
        try:
            self._request("DELETE", f"/job/{job_id}", user=user)
        except PermanentBackendError as exc:
            if "already completing or completed" in str(exc).lower() or "invalid job id" in str(exc).lower():
                return  # already gone counts as done
            raise

    def nodes(self) -> list[dict]:
        return [node_record(n) for n in self._request("GET", "/nodes").get("nodes") or [] if isinstance(n, dict)]
