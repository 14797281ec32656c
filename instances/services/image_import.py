"""Bring your own image: an account imports an image from a registry the operator allows, and launches
from it as from one it saved.

``image_import`` reads the reference (a clear 400 when it is not one), refuses a registry not in
``IMAGES_ALLOWED_REGISTRIES`` (naming those allowed), then asks the registry for the image's manifest
and config only, with the account's saved login for that registry if it has one
(``vault.selectors.registry_login_for``): no layer is downloaded, so a check takes two or three small
requests, each within ``IMAGES_IMPORT_TIMEOUT_S``. It is done while the request waits, so what the
registry said is the answer: a private image without a login, a refused login, an image that is not
there or is built for another platform is a 4xx naming it; a registry that does not answer is a 503
with ``Retry-After``, and nothing is recorded. On success the image is an ``Image`` of the account,
READY, pinned to the digest read (a later push to the same tag changes nothing launched from it), with
its size, platform and whether its config says it follows the image contract (the label
``org.gpu-console.contract``, as the local runtime decides after its pull; an image that does not
gets the console's start script mounted and set as its entrypoint at launch).

Nothing is billed for an imported image: the console keeps no copy of it (a node pulls it by digest
at launch, with the same login, and caches it as it caches the catalogue's); its instances are billed
as any other from the moment they run.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from instances.errors import (
    ImageExists,
    ImageImportRefused,
    ImageNotFound,
    ImageWrongArchitecture,
    LaunchInvalid,
    RegistryAuthFailed,
    RegistryAuthRequired,
    RegistryNotAllowed,
    RegistryUnavailable,
)
from instances.models import Image
from instances.registry import (
    Registry,
    RegistryAuthError,
    RegistryError,
    RegistryNotFound,
    RegistryUnreachable,
)
from instances.services.images import NAME_RE, TAG_RE
from teams.models import TeamEvent
from teams.services import team_event_record
from vault.selectors import registry_login_for

# The image contract's label (images/contract/README.md; providers' CONTRACT_LABEL): "1" when it follows it.
CONTRACT_LABEL = "org.gpu-console.contract"
CUDA_LABEL = "org.gpu-console.cuda"
# An image reference as Docker's distribution/reference grammar writes one (lower-case paths).
_HOST = r"(?:localhost|[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*)(?::[0-9]{1,5})?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
REFERENCE_RE = re.compile(
    rf"(?:(?P<host>{_HOST})/)?(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?"
)
DOCKER_HUB = "docker.io"


@dataclass(frozen=True)
class ImageReference:
    """A parsed reference: ``host/path[:tag][@digest]``; a reference with no host is Docker Hub's."""

    host: str
    path: str
    tag: str
    digest: str

    @property
    def repository(self) -> str:
        return f"{self.host}/{self.path}"

    @property
    def reference(self) -> str:
        """What the registry is asked for: the digest when one is given, else the tag (``latest``)."""
        return self.digest or self.tag or "latest"

    def __str__(self) -> str:
        return self.repository + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")


def image_reference_parse(text: str) -> ImageReference:
    """``text`` as an ``ImageReference``; ``LaunchInvalid`` (field ``reference``, a 400) when it is none."""
    text = (text or "").strip()
    found = REFERENCE_RE.fullmatch(text) if 0 < len(text) <= 255 else None
    if found is None:
        raise LaunchInvalid(
            _(
                "That is not an image reference: write it as registry/repository:tag or "
                "registry/repository@sha256:digest (for example %(example)s)."
            )
            % {"example": "registry.example.com/team/image:1.0"},
            field="reference",
        )
    host, path = found["host"], found["path"]
    # A first part with no dot, port or "localhost" is a path (Docker Hub's "user/image"), not a host.
    if host and not ("." in host or ":" in host or host == "localhost"):
        host, path = None, f"{host}/{path}"
    if not host:
        host = DOCKER_HUB
        path = path if "/" in path else f"library/{path}"
    return ImageReference(host=host.lower(), path=path, tag=found["tag"] or "", digest=found["digest"] or "")


def images_allowed_registries() -> list[str]:
    """The registries (hosts with their port) an account may import from: ``IMAGES_ALLOWED_REGISTRIES``,
    or the console's own registry alone."""
    allowed = [host.strip().lower() for host in settings.IMAGES_ALLOWED_REGISTRIES if host.strip()]
    if allowed:
        return allowed
    own = (settings.CONSOLE_REGISTRY or "").strip().rstrip("/").split("/", 1)[0].lower()
    return [own] if own else []


def _plain_http(host: str) -> bool:
    own = (settings.CONSOLE_REGISTRY or "").strip().split("/", 1)[0].lower()
    insecure = {h.strip().lower() for h in settings.IMAGES_INSECURE_REGISTRIES}
    return host in insecure or (host == own and not settings.CONSOLE_REGISTRY_TLS_VERIFY)


def _name_and_tag(ref: ImageReference, name: str, tag: str) -> tuple[str, str]:
    name = (name or "").strip() or ref.path.rsplit("/", 1)[-1]
    tag = (tag or "").strip() or ref.tag or (f"sha256-{ref.digest[7:19]}" if ref.digest else "latest")
    if not (1 <= len(name) <= 64 and NAME_RE.fullmatch(name)):
        raise LaunchInvalid(
            _("An image's name is 1 to 64 lower-case letters and digits, with . _ - between them."), field="name"
        )
    if not TAG_RE.fullmatch(tag):
        raise LaunchInvalid(_("A tag is 1 to 128 letters, digits, . _ and -, not starting with . or -."), field="tag")
    return name, tag


def image_import(*, owner, actor, reference: str, name: str = "", tag: str = "", note: str = "") -> Image:
    """Import the image ``reference`` for account ``owner``: inspect it in its registry (with the
    account's saved login for that registry, if any) and record it READY, pinned to its digest. Raises
    ``LaunchInvalid`` (400) for a reference that is none or a bad name, ``ImageImportRefused``'s kinds
    for what the registry said (their ``status``), ``ImageExists`` (409) for a name and tag taken."""
    ref = image_reference_parse(reference)
    allowed = images_allowed_registries()
    if ref.host not in allowed:
        raise RegistryNotAllowed(
            _("Images can be imported only from %(allowed)s; %(host)s is not among them.")
            % {"allowed": ", ".join(allowed) or _("no registry (this console allows none)"), "host": ref.host},
            allowed=allowed,
        )
    name, tag = _name_and_tag(ref, name, tag)
    note = (note or "").strip()
    if len(note) > 500:
        raise LaunchInvalid(_("The note is at most 500 characters."), field="note")
    login = registry_login_for(owner_id=owner.pk, host=ref.host)
    registry = Registry(
        address=ref.host,
        username=login[0] if login else "",
        password=login[1] if login else "",
        tls_verify=not _plain_http(ref.host),
        timeout=settings.IMAGES_IMPORT_TIMEOUT_S,
    )
    platform = settings.IMAGES_PLATFORM
    try:
        facts = registry.image_inspect(ref.repository, ref.reference, platform=platform)
    except RegistryAuthError as exc:
        if exc.had_credentials:
            raise RegistryAuthFailed(
                _("%(host)s refused the login you saved for it: replace it under Registry credentials.")
                % {"host": ref.host}
            ) from exc
        raise RegistryAuthRequired(
            _("%(ref)s is private: save a login for %(host)s under Registry credentials, then import it again.")
            % {"ref": str(ref), "host": ref.host}
        ) from exc
    except RegistryNotFound as exc:
        raise ImageNotFound(_("%(host)s has no image %(ref)s.") % {"host": ref.host, "ref": str(ref)}) from exc
    except RegistryUnreachable as exc:
        raise RegistryUnavailable(
            _("%(host)s did not answer in time: nothing was imported; try again in a minute.") % {"host": ref.host}
        ) from exc
    except RegistryError as exc:
        raise ImageImportRefused(
            _("%(host)s did not serve %(ref)s as an image.") % {"host": ref.host, "ref": str(ref)}
        ) from exc
    if facts.platform != platform:
        raise ImageWrongArchitecture(
            _("%(ref)s is built for %(found)s; this console's machines run %(platform)s.")
            % {"ref": str(ref), "found": ", ".join(facts.platforms) or _("no platform"), "platform": platform}
        )
    config = facts.config.get("config") or {}
    labels = config.get("Labels") or {}
    follows = labels.get(CONTRACT_LABEL) == "1"
    image = Image(
        slug=f"img-{uuid.uuid4().hex[:16]}",
        name=name,
        tag=tag,
        note=note,
        owner_id=owner.pk,
        created_by=actor,
        status=Image.Status.READY,
        is_active=False,  # never in the catalogue
        framework="custom",
        cuda_version=str(labels.get(CUDA_LABEL) or "")[:16],
        os=facts.platform[:32],
        repository=ref.repository,
        digest=facts.digest,
        size_bytes=facts.size_bytes,
        imported_from=str(ref)[:300],
        platform=facts.platform[:64],
        follows_contract=follows,
        contents={
            "imported_from": str(ref),
            "entrypoint": config.get("Entrypoint") or [],
            "cmd": config.get("Cmd") or [],
            "user": config.get("User") or "",
        },
    )
    try:
        with transaction.atomic():
            image.save(force_insert=True)
            team_event_record(
                account=owner,
                actor=actor,
                action=TeamEvent.Action.IMAGE_IMPORTED,
                target=f"{name}:{tag}",
                details={"image": image.slug, "from": str(ref)[:300]},
            )
    except IntegrityError as exc:
        raise ImageExists(
            _("You already have an image %(name)s:%(tag)s: choose another name or tag, or delete that one.")
            % {"name": name, "tag": tag},
        ) from exc
    return image
