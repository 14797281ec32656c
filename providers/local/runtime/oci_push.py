"""A saved image's push straight to the registry its base came from (the OCI distribution API, ``/v2/``):
the base's layers are mounted from its repository (nothing is copied), the new layer and config are
uploaded, then the manifest is put under the tag. What ``ContainerRuntime.image_save`` does when the
instance runs a pinned image of the console's registry; anything else goes through ``podman commit``.

Basic credentials come from a containers-auth.json (``REGISTRY_AUTH_FILE``); a registry that asks for a
bearer token is not spoken to here (the commit path, through skopeo, is used instead).
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import httpx

MANIFEST_ACCEPT = ", ".join(
    (
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
    )
)
CHUNK = 1 << 20


class PushUnsupported(Exception):
    """This registry or base cannot take the direct push (the caller falls back to the commit path)."""


def split_reference(reference: str) -> tuple[str, str, str]:
    """``(host, path, digest)`` of ``host[:port]/path@sha256:…``; ValueError for any other reference."""
    name, at, digest = reference.partition("@")
    host, slash, path = name.partition("/")
    if not (at and slash and digest.startswith("sha256:") and ("." in host or ":" in host or host == "localhost")):
        raise ValueError(f"{reference} is not a pinned registry reference")
    return host, path, digest


class Registry:
    def __init__(self, host: str, *, insecure: bool, auth_file: str = "", timeout: float = 600) -> None:
        auth = None
        if auth_file:
            entry = (json.loads(Path(auth_file).read_text()).get("auths") or {}).get(host) or {}
            if entry.get("auth"):
                user, _colon, password = base64.b64decode(entry["auth"]).decode().partition(":")
                auth = (user, password)
        scheme = "http" if insecure else "https"
        self.client = httpx.Client(base_url=f"{scheme}://{host}", auth=auth, timeout=timeout, follow_redirects=True)

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc) -> None:
        self.client.close()

    def _check(self, response: httpx.Response, what: str) -> httpx.Response:
        if response.status_code == 401:
            raise PushUnsupported(f"the registry wants a token for {what}")
        if response.status_code >= 400:
            raise PushUnsupported(f"{what}: {response.status_code} {response.text[:200]}")
        return response

    def manifest(self, path: str, reference: str) -> dict:
        """The image manifest of ``path@reference`` (an index's linux/amd64 entry, else its first)."""
        response = self._check(
            self.client.get(f"/v2/{path}/manifests/{reference}", headers={"Accept": MANIFEST_ACCEPT}), "the manifest"
        )
        body = response.json()
        if "manifests" in body:
            entries = body["manifests"] or []
            chosen = next(
                (m for m in entries if (m.get("platform") or {}).get("architecture") == "amd64"),
                entries[0] if entries else None,
            )
            if chosen is None:
                raise PushUnsupported("the base is an empty index")
            return self.manifest(path, chosen["digest"])
        return body

    def blob(self, path: str, digest: str) -> bytes:
        return self._check(self.client.get(f"/v2/{path}/blobs/{digest}"), "a blob").content

    def mount(self, path: str, digest: str, source: str) -> None:
        """Make blob ``digest`` of repository ``source`` one of ``path``'s, copying nothing."""
        if self.client.head(f"/v2/{path}/blobs/{digest}").status_code == 200:
            return
        response = self.client.post(f"/v2/{path}/blobs/uploads/", params={"mount": digest, "from": source})
        if response.status_code != 201:
            raise PushUnsupported(f"the registry did not mount {digest} from {source} ({response.status_code})")

    def upload(self, path: str, digest: str, data: bytes | Path) -> None:
        """Upload a blob whole (one POST, one PUT), streamed from ``data`` when it is a file."""
        if self.client.head(f"/v2/{path}/blobs/{digest}").status_code == 200:
            return
        start = self._check(self.client.post(f"/v2/{path}/blobs/uploads/"), "an upload")
        location = start.headers["location"]
        if isinstance(data, Path):
            size = data.stat().st_size

            def chunks():
                with open(data, "rb") as handle:
                    while chunk := handle.read(CHUNK):
                        yield chunk

            content, length = chunks(), size
        else:
            content, length = data, len(data)
        separator = "&" if "?" in location else "?"
        self._check(
            self.client.put(
                f"{location}{separator}digest={digest}",
                content=content,
                headers={"Content-Type": "application/octet-stream", "Content-Length": str(length)},
            ),
            "the upload",
        )

    def put_manifest(self, path: str, tag: str, manifest: dict) -> tuple[str, int]:
        """Put ``manifest`` under ``path:tag``; returns its digest and length."""
        body = json.dumps(manifest, separators=(",", ":")).encode()
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        self._check(
            self.client.put(
                f"/v2/{path}/manifests/{tag}", content=body, headers={"Content-Type": manifest["mediaType"]}
            ),
            "the manifest",
        )
        return digest, len(body)
