"""The console's OCI registry: where the catalogue's images are published, and what the registry says of
them (their digest and size), through its HTTP API (the OCI distribution spec, ``/v2/``).

``CONSOLE_REGISTRY`` names it (``host:port[/prefix]``); `make run` starts a private one
(``console.embedded.EmbeddedRegistry``). Credentials are basic auth, or a bearer token fetched from the
realm a ``WWW-Authenticate: Bearer`` challenge names (distribution's ``auth: token``), as ``docker
login`` does. Pushing is skopeo's (``image_push``): it speaks every transport the build may leave an
image in (``containers-storage:`` for podman's store, ``oci:`` / ``oci-archive:`` for a layout).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import httpx
from django.conf import settings

MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
INDEX_TYPES = MANIFEST_TYPES[2:]


class RegistryError(RuntimeError):
    """The registry refused or could not be reached; the message says which and why."""


class RegistryAuthError(RegistryError):
    """The registry asked for credentials (401, a token service's refusal) or refused them (403)."""

    def __init__(self, message: str, *, had_credentials: bool) -> None:
        super().__init__(message)
        self.had_credentials = had_credentials


class RegistryNotFound(RegistryError):
    """The registry has no such repository, tag or digest (404)."""


class RegistryUnreachable(RegistryError):
    """The registry did not answer (no connection, a timeout) or answered with a server error: try later."""


@dataclass(frozen=True)
class ImageFacts:
    """What a registry says of one image: its manifest's digest (what a pull pins), the bytes a pull
    fetches, its ``os/architecture`` (empty when an index has none for the platform asked), the
    platforms it offers, and its config (``config.config``: entrypoint, user, labels)."""

    digest: str
    size_bytes: int
    platform: str
    platforms: tuple[str, ...]
    config: dict


@dataclass(frozen=True)
class Registry:
    """A registry as settings name it: ``address`` is ``host:port`` with an optional path prefix."""

    address: str
    username: str = ""
    password: str = ""
    tls_verify: bool = True
    timeout: float = 30

    @classmethod
    def from_settings(cls) -> Registry:
        if not settings.CONSOLE_REGISTRY:
            raise RegistryError(
                "No registry is configured: set CONSOLE_REGISTRY (make run starts a private one and names it)."
            )
        return cls(
            address=settings.CONSOLE_REGISTRY.strip().rstrip("/"),
            username=settings.CONSOLE_REGISTRY_USERNAME,
            password=settings.CONSOLE_REGISTRY_PASSWORD,
            tls_verify=settings.CONSOLE_REGISTRY_TLS_VERIFY,
        )

    @property
    def host(self) -> str:
        return self.address.split("/", 1)[0]

    @property
    def base_url(self) -> str:
        return f"{'https' if self.tls_verify else 'http'}://{self.host}"

    def repository(self, name: str) -> str:
        """The full repository an image named ``name`` is published as: ``host:port[/prefix]/name``."""
        if not re.fullmatch(r"[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*", name):
            raise RegistryError(f"{name!r} is not a repository name (lower-case letters, digits, . _ - and /).")
        return f"{self.address}/{name}"

    def path_of(self, repository: str) -> str:
        """The repository's path on the registry (what follows ``/v2/``)."""
        prefix = self.host + "/"
        if not repository.startswith(prefix):
            raise RegistryError(f"{repository} is not in the registry {self.host}.")
        return repository[len(prefix) :]

    # --- the HTTP API ----------------------------------------------------------------------------------

    def _client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, verify=self.tls_verify, timeout=self.timeout, follow_redirects=True)

    def _get(self, client: httpx.Client, method: str, url: str, *, scope: str, headers: dict) -> httpx.Response:
        auth = (self.username, self.password) if self.username else None
        response = client.request(method, url, headers=headers, auth=auth)
        challenge = response.headers.get("www-authenticate", "")
        if response.status_code == 401 and challenge.lower().startswith("bearer "):
            token = self._token(client, challenge, scope=scope)
            response = client.request(method, url, headers={**headers, "Authorization": f"Bearer {token}"})
        if response.status_code in (401, 403):
            raise RegistryAuthError(
                f"The registry {self.host} refused the credentials ({response.status_code}).",
                had_credentials=bool(self.username),
            )
        if response.status_code >= 500:
            raise RegistryUnreachable(f"The registry {self.host} answered {response.status_code}.")
        return response

    def _token(self, client: httpx.Client, challenge: str, *, scope: str) -> str:
        params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
        realm = params.pop("realm", "")
        if not realm:
            raise RegistryError(f"The registry {self.host} asked for a token without naming where to get one.")
        params.setdefault("scope", scope)
        auth = (self.username, self.password) if self.username else None
        answer = client.get(realm, params=params, auth=auth)
        if answer.status_code != 200:
            raise RegistryAuthError(
                f"The registry's token service refused the credentials ({answer.status_code}).",
                had_credentials=bool(self.username),
            )
        body = answer.json()
        return body.get("token") or body.get("access_token") or ""

    def manifest(self, repository: str, reference: str) -> tuple[str, dict, int]:
        """``(digest, manifest, manifest bytes)`` of ``repository:reference`` as the registry serves it.

        The digest is the registry's ``Docker-Content-Digest`` answer to a HEAD with the manifest types
        it may hold (OCI and Docker's), checked against the body's own hash.
        """
        path = self.path_of(repository)
        url = f"/v2/{path}/manifests/{reference}"
        headers = {"Accept": ", ".join(MANIFEST_TYPES)}
        scope = f"repository:{path}:pull"
        try:
            with self._client() as client:
                head = self._get(client, "HEAD", url, scope=scope, headers=headers)
                if head.status_code == 404:
                    raise RegistryNotFound(f"{repository}:{reference} is not in the registry.")
                head.raise_for_status()
                digest = head.headers.get("docker-content-digest", "")
                body = self._get(
                    client, "GET", f"/v2/{path}/manifests/{digest or reference}", scope=scope, headers=headers
                )
                body.raise_for_status()
        except httpx.HTTPStatusError as exc:
            raise RegistryError(f"The registry {self.host} answered {exc.response.status_code}.") from exc
        except httpx.HTTPError as exc:
            raise RegistryUnreachable(f"The registry {self.host} did not answer: {exc}") from exc
        served = "sha256:" + hashlib.sha256(body.content).hexdigest()
        if digest and digest != served:
            raise RegistryError(f"The registry named {digest} for a manifest whose hash is {served}.")
        return served, body.json(), len(body.content)

    def blob_json(self, repository: str, digest: str, *, limit: int = 1 << 20) -> dict:
        """The JSON blob ``digest`` of ``repository`` (an image's config), checked against its digest."""
        path = self.path_of(repository)
        try:
            with self._client() as client:
                answer = self._get(
                    client, "GET", f"/v2/{path}/blobs/{digest}", scope=f"repository:{path}:pull", headers={}
                )
                if answer.status_code == 404:
                    raise RegistryNotFound(f"{repository}@{digest} is not in the registry.")
                answer.raise_for_status()
        except httpx.HTTPStatusError as exc:
            raise RegistryError(f"The registry {self.host} answered {exc.response.status_code}.") from exc
        except httpx.HTTPError as exc:
            raise RegistryUnreachable(f"The registry {self.host} did not answer: {exc}") from exc
        if len(answer.content) > limit or "sha256:" + hashlib.sha256(answer.content).hexdigest() != digest:
            raise RegistryError(f"The registry served a blob that is not {digest}.")
        return answer.json()

    def image_inspect(self, repository: str, reference: str, *, platform: str) -> ImageFacts:
        """What pulling ``repository:reference`` (a tag or a digest) for ``platform`` (``linux/amd64``)
        would fetch, read from its manifest and config only (no layer is downloaded). An index (a
        multi-platform image) is resolved to its entry for ``platform``; ``ImageFacts.platforms`` lists
        the ones it has when none fits, and a single image's own platform otherwise."""
        digest, manifest, length = self.manifest(repository, reference)
        if manifest.get("mediaType") in INDEX_TYPES or "manifests" in manifest:
            entries = manifest.get("manifests") or []
            found = [
                f"{(e.get('platform') or {}).get('os', '?')}/{(e.get('platform') or {}).get('architecture', '?')}"
                for e in entries
            ]
            chosen = next((e for e, name in zip(entries, found, strict=True) if name == platform), None)
            if chosen is None:
                return ImageFacts(digest=digest, size_bytes=0, platform="", platforms=tuple(found), config={})
            digest, manifest, length = self.manifest(repository, chosen["digest"])
        config_ref = manifest.get("config") or {}
        config = self.blob_json(repository, config_ref["digest"]) if config_ref.get("digest") else {}
        blobs = [config_ref, *(manifest.get("layers") or [])]
        size = length + sum(int(blob.get("size") or 0) for blob in blobs)
        own = f"{config.get('os', '?')}/{config.get('architecture', '?')}"
        return ImageFacts(digest=digest, size_bytes=size, platform=own, platforms=(own,), config=config)

    def manifest_delete(self, repository: str, digest: str) -> bool:
        """Delete the manifest ``digest`` of ``repository`` (every tag naming it goes with it); its blobs
        stay until the registry's garbage collection. Returns False when it was not there."""
        path = self.path_of(repository)
        try:
            with self._client() as client:
                response = self._get(
                    client, "DELETE", f"/v2/{path}/manifests/{digest}", scope=f"repository:{path}:delete", headers={}
                )
        except httpx.HTTPError as exc:
            raise RegistryError(f"The registry {self.host} did not answer: {exc}") from exc
        if response.status_code == 404:
            return False
        if response.status_code not in (200, 202):
            raise RegistryError(
                f"The registry {self.host} refused to delete {repository}@{digest} ({response.status_code})."
            )
        return True

    def image_size(self, repository: str, reference: str) -> tuple[str, int]:
        """``(digest, bytes)``: what pulling ``repository:reference`` fetches (its manifest, config and
        layers, compressed as stored). An index counts its first image's."""
        digest, manifest, length = self.manifest(repository, reference)
        if manifest.get("mediaType") in INDEX_TYPES or "manifests" in manifest:
            first = (manifest.get("manifests") or [{}])[0].get("digest")
            if not first:
                raise RegistryError(f"{repository}:{reference} is an empty index.")
            _digest, manifest, length = self.manifest(repository, first)
        blobs = [manifest.get("config") or {}, *(manifest.get("layers") or [])]
        return digest, length + sum(int(blob.get("size") or 0) for blob in blobs)


# --- pushing -----------------------------------------------------------------------------------------------


def containers_env(var_dir: Path) -> dict[str, str]:
    """The environment skopeo needs to read podman's store where the build keeps it (``var/containers``:
    its ``storage.conf`` and ``containers.conf``, written by the local backend's setup), else the host's."""
    env = dict(os.environ)
    # The build's store is the checkout's var/containers (scripts/container-deps.sh), whatever
    # CONSOLE_VAR_DIR says; CONSOLE_CONTAINERS_DIR names another.
    folders = [Path(os.environ["CONSOLE_CONTAINERS_DIR"])] if os.environ.get("CONSOLE_CONTAINERS_DIR") else []
    folders += [var_dir / "containers", Path(settings.BASE_DIR) / "var" / "containers"]
    folder = next((f for f in folders if (f / "storage.conf").exists()), None)
    for name, variable in (("storage.conf", "CONTAINERS_STORAGE_CONF"), ("containers.conf", "CONTAINERS_CONF")):
        if folder is not None and (folder / name).exists():
            env[variable] = str(folder / name)
    return env


def image_push(*, registry: Registry, source: str, repository: str, tag: str, env: dict[str, str]) -> str:
    """Copy the image at ``source`` (a skopeo transport reference) to ``repository:tag``; returns the
    digest skopeo wrote (the registry's answer is read separately by ``Registry.image_size``)."""
    skopeo = shutil.which("skopeo")
    if not skopeo:
        raise RegistryError("skopeo is not installed: `apt-get install skopeo` (scripts/container-deps.sh does).")
    with tempfile.TemporaryDirectory() as scratch:
        digest_file = Path(scratch) / "digest"
        argv = [skopeo, "copy", "--quiet", "--digestfile", str(digest_file)]
        argv.append(f"--dest-tls-verify={'true' if registry.tls_verify else 'false'}")
        if registry.username:  # in a file of its own (mode 600), never on a command line others can read
            auth_file = Path(scratch) / "auth.json"
            secret = base64.b64encode(f"{registry.username}:{registry.password}".encode()).decode()
            auth_file.write_text(json.dumps({"auths": {registry.host: {"auth": secret}}}))
            auth_file.chmod(0o600)
            argv += ["--dest-authfile", str(auth_file)]
        argv += [source, f"docker://{repository}:{tag}"]
        result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)  # noqa: S603
        if result.returncode != 0:
            raise RegistryError(f"Pushing {source} to {repository}:{tag} failed: {result.stderr.strip()[-500:]}")
        return digest_file.read_text().strip()
