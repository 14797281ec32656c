"""Publishing the catalogue's images: each one the build left (``var/images/<name>.json``, written by
``scripts/images.py build``) is pushed to the console's registry, and the digest and size the registry
reports are recorded on its catalogue image, with what the build found inside it. A launch then pins
that digest (``Image.pinned_ref``).

The build's record (the interface with ``scripts/images.py``), a JSON object:

- ``name``: the image's name in the repository (``images/<name>/``);
- ``image_id`` (or ``id``): the image in podman's store, pushed as ``containers-storage:<image_id>``;
  or ``source``: any skopeo transport reference instead (``oci-archive:/path.tar``, ``oci:/dir:tag``);
- ``ref``: its local name (``localhost/console/minimal:latest``): it is pushed as the same path and
  tag in the registry (``<CONSOLE_REGISTRY>/console/minimal:latest``); without one, as ``<name>``;
- ``tag``: the tag to push, where ``ref`` does not say (default ``latest``);
- ``contract``: false for an image that is no instance image (the base the others are built on):
  published only when named on the command line, and never made a catalogue image;
- ``contents``: what is inside, ``{"python": "3.11.2", "cuda": "12.4", "torch": "2.5.1", "os": "Debian 12"}``;
- optional catalogue fields, which ``images/<name>/image.toml`` gives when the record does not:
  ``slug``, ``display_name``, ``framework``, ``framework_version``, ``python_version``, ``cuda_version``,
  ``os``, ``active``. Without a slug, an image with Python X.Y inside is ``python-X.Y-<name>``
  ("Python X.Y (<name>)"), else ``<name>``.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction

from instances.models import Image
from instances.registry import Registry, RegistryError, containers_env, image_push

CATALOGUE_FIELDS = ("framework", "framework_version", "python_version", "cuda_version", "os")


@dataclass(frozen=True)
class Published:
    slug: str
    repository: str
    tag: str
    digest: str
    size_bytes: int
    created: bool


def build_record(path: Path, *, images_dir: Path) -> dict:
    """The build's record at ``path``, completed with ``images/<name>/image.toml`` (the record wins)."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise RegistryError(f"{path} is not a build record: {exc}") from exc
    if not isinstance(record, dict) or not record.get("name"):
        raise RegistryError(f'{path} names no image (its "name").')
    meta_path = images_dir / str(record["name"]) / "image.toml"
    meta = tomllib.loads(meta_path.read_text()) if meta_path.exists() else {}
    return {**meta, **record}


def _repository_path(record: dict) -> tuple[str, str]:
    """The repository path and tag an image is pushed as: its local ``ref`` without ``localhost/``."""
    ref = str(record.get("ref") or "")
    if ref:
        ref = ref.removeprefix("localhost/")
        path, colon, tag = ref.rpartition(":")
        if colon and "/" not in tag:
            return path, tag
        return ref, str(record.get("tag") or "latest")
    return str(record["name"]), str(record.get("tag") or "latest")


def image_publish(*, record: dict, registry: Registry, var_dir: Path) -> Published:
    """Push the image a build record names and record the registry's digest and size on its catalogue
    image (created when the slug is new, offered unless the record says ``"active": false``; an existing
    image keeps whether it is offered). Repeatable: pushing unchanged layers costs nothing."""
    name = str(record["name"])
    path, tag = _repository_path(record)
    source = record.get("source") or (
        f"containers-storage:{record.get('image_id') or record.get('id')}"
        if (record.get("image_id") or record.get("id"))
        else ""
    )
    if not source:
        raise RegistryError(f"The build record of {name} names neither an image_id nor a source.")
    repository = registry.repository(path)
    pushed = image_push(registry=registry, source=source, repository=repository, tag=tag, env=containers_env(var_dir))
    digest, size = registry.image_size(repository, tag)
    if pushed and pushed != digest:
        raise RegistryError(f"skopeo pushed {pushed} but the registry names {digest} for {repository}:{tag}.")
    contents = {k: v for k, v in (record.get("contents") or {}).items() if v not in (None, "")}
    if record.get("size_bytes"):  # unpacked, as the build's store counts it; ``size`` is what a pull fetches
        contents["disk_bytes"] = int(record["size_bytes"])
    if record.get("contract") is False:  # pushed (it is what the others are built on), not offered
        return Published(slug="", repository=repository, tag=tag, digest=digest, size_bytes=size, created=False)
    python = ".".join(str(contents.get("python") or "").split(".")[:2])
    slug = str(record.get("slug") or (f"python-{python}-{name}" if python else name))
    display = record.get("display_name") or (f"Python {python} ({name})" if python else name)
    fields = {
        "repository": repository,
        "tag": tag,
        "digest": digest,
        "size_bytes": size,
        "contents": contents,
        **{field: str(record[field]) for field in CATALOGUE_FIELDS if record.get(field)},
    }
    if not fields.get("python_version") and contents.get("python"):
        fields["python_version"] = str(contents["python"])[:16]
    if not fields.get("cuda_version"):
        fields["cuda_version"] = str(contents.get("cuda") or "")[:16]
    with transaction.atomic():
        image = Image.objects.select_for_update().filter(slug=slug).first()
        created = image is None
        if created:
            image = Image(
                slug=slug,
                name=str(display)[:96],
                framework=str(record.get("framework") or "Python")[:32],
                is_active=bool(record.get("active", True)),
                sort_order=Image.objects.count(),
            )
        for field, value in fields.items():
            setattr(image, field, value)
        image.save()
    return Published(slug=slug, repository=repository, tag=tag, digest=digest, size_bytes=size, created=created)
