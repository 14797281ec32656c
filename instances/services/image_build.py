"""Images built from a recipe (a Containerfile): the "Build" of the Images page, ``POST /api/v1/images/build/``.

Every saved image carries the recipe that rebuilds it (``Image.recipe``, read off its layer at the
save: ``providers.local.runtime.image_recipe``). An owner edits it and builds a new image of their
account: an ``Image`` BUILDING until the builder (a provider with ``ImageBuildCapability``) has built
and pushed it, then READY with its digest and size and billed per GB-day as a saved image; a build that
fails or runs past its time is FAILED with the log's tail, and nothing is billed.

The recipe is the owner's, so it is checked before anything runs (``recipe_check``): one ``FROM`` of
an image of the console's registry the person may use here (the catalogue's, their own saved images,
their team's shared ones), ``COPY`` only ``--from`` such an image (there is no build context), and no
instruction or flag that reaches outside the build (``ADD``, ``RUN --mount``/``--network``/
``--security``, ``ONBUILD``, a parser directive). The builder holds it in the owner's uid range,
with CPU, memory, process and time limits and the network ``INSTANCES_IMAGE_BUILD_NETWORK``.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from core.messages import reason as stored
from core.tasks import enqueue_on_commit
from instances.errors import ImageBuildNotSupported, ImageExists, LaunchInvalid
from instances.images import images_saved_for
from instances.models import Image
from instances.services.images import _check_name_tag, _namespace, image_ready_bill
from instances.tenancy import tenant_for
from providers import BuildLimits, PermanentBackendError, backend_aliases, get_backend

# Instructions a recipe may hold; anything else (ADD, ONBUILD…) is refused before the build.
ALLOWED = {
    "FROM",
    "RUN",
    "COPY",
    "ENV",
    "ARG",
    "LABEL",
    "WORKDIR",
    "USER",
    "EXPOSE",
    "CMD",
    "ENTRYPOINT",
    "SHELL",
    "STOPSIGNAL",
    "HEALTHCHECK",
    "MAINTAINER",
    "VOLUME",
}
COPY_FLAGS = ("--from=", "--chown=", "--chmod=")
DIRECTIVE = re.compile(r"^#\s*(syntax|escape|check)\s*=", re.I)
REFERENCE = re.compile(
    r"^(?P<repository>[a-z0-9.:-]+(?:/[a-z0-9._-]+)+)(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)


@dataclass(frozen=True)
class Instruction:
    line: int  # where it starts in the recipe, from 1
    keyword: str
    arguments: str


def recipe_instructions(recipe: str) -> list[Instruction]:
    """The recipe's instructions, continuation lines joined and comments dropped (the same reading as
    the builder's, or a stricter one: a heredoc's lines are read as instructions too, so nothing in it
    escapes the check). ``LaunchInvalid`` for a parser directive, which could change that reading."""
    instructions: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(recipe.splitlines(), 1):
        line = raw.strip()
        if not pending and DIRECTIVE.match(line):
            raise LaunchInvalid(
                _("Line %(line)d: parser directives (# syntax=, # escape=) are not accepted.") % {"line": number},
                field="recipe",
            )
        if not line or line.startswith("#"):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending.append(line[:-1])
            continue
        pending.append(line)
        text = " ".join(part.strip() for part in pending).strip()
        pending = []
        keyword, _space, arguments = text.partition(" ")
        instructions.append(Instruction(line=start, keyword=keyword.upper(), arguments=arguments.strip()))
    if pending:
        text = " ".join(pending)
        keyword, _space, arguments = text.partition(" ")
        instructions.append(Instruction(line=start, keyword=keyword.upper(), arguments=arguments.strip()))
    return instructions


def _refuse(instruction: Instruction, message: str):
    raise LaunchInvalid(_("Line %(line)d: %(why)s") % {"line": instruction.line, "why": message}, field="recipe")


def _usable_image(reference: str, *, principal, membership, user) -> Image | None:
    """The READY image of the console's registry that ``reference`` names and the person may use here
    (the catalogue's, or one of the acting account's they see), or None."""
    address = (settings.CONSOLE_REGISTRY or "").strip().rstrip("/")
    found = REFERENCE.match(reference)
    if not address or found is None or not found["repository"].startswith(address + "/"):
        return None
    if not (found["tag"] or found["digest"]):
        return None
    mine = images_saved_for(principal=principal, membership=membership, user=user).values("pk")
    qs = Image.objects.filter(repository=found["repository"], status=Image.Status.READY).filter(
        Q(owner__isnull=True, is_active=True) | Q(pk__in=mine)
    )
    if found["digest"]:
        qs = qs.filter(digest=found["digest"])
    if found["tag"]:
        qs = qs.filter(tag=found["tag"])
    return qs.order_by("owner_id", "-created_at").first()


def recipe_check(recipe: str, *, principal, membership, user) -> Image:
    """Refuse (``LaunchInvalid``, a 400 naming ``recipe``) what the builder must not run; returns the
    image the recipe starts ``FROM`` (see the module's docstring)."""
    if not recipe.strip():
        raise LaunchInvalid(_("The recipe is empty."), field="recipe")
    if len(recipe.encode()) > settings.INSTANCES_IMAGE_BUILD_RECIPE_MAX_BYTES:
        raise LaunchInvalid(
            _("A recipe is at most %(n)d bytes.") % {"n": settings.INSTANCES_IMAGE_BUILD_RECIPE_MAX_BYTES},
            field="recipe",
        )
    instructions = recipe_instructions(recipe)
    if not instructions or instructions[0].keyword != "FROM":
        raise LaunchInvalid(_("A recipe starts with FROM (comments may come before it)."), field="recipe")
    base = None
    where = {"principal": principal, "membership": membership, "user": user}
    not_yours = _(
        "%(ref)s is not an image of this console's registry that you may use: start FROM one of your saved "
        "images, your team's shared ones or the catalogue's, by its reference (repository@digest)."
    )
    for instruction in instructions:
        keyword, arguments = instruction.keyword, instruction.arguments
        if keyword not in ALLOWED:
            _refuse(instruction, _("%(keyword)s is not accepted by the console's builder.") % {"keyword": keyword})
        words = arguments.split()
        if keyword == "FROM":
            if base is not None:
                _refuse(instruction, _("A recipe has one FROM (no multi-stage builds)."))
            if len(words) != 1 or words[0].startswith("--"):
                _refuse(instruction, _("FROM takes one image reference, with no options and no AS."))
            base = _usable_image(words[0], **where)
            if base is None:
                _refuse(instruction, not_yours % {"ref": words[0]})
        elif keyword == "RUN" and words and words[0].startswith("--"):
            _refuse(instruction, _("RUN takes no options (--mount, --network, --security)."))
        elif keyword == "COPY":
            flags = [w for w in words if w.startswith("--")]
            if any(not f.startswith(COPY_FLAGS) for f in flags):
                _refuse(instruction, _("COPY takes only --from, --chown and --chmod."))
            source = next((f.split("=", 1)[1] for f in flags if f.startswith("--from=")), "")
            if not source:
                _refuse(instruction, _("COPY needs --from=<image>: the builder has no build context."))
            if _usable_image(source, **where) is None:
                _refuse(instruction, not_yours % {"ref": source})
    assert base is not None
    return base


def _builder():
    """The provider that builds: ``INSTANCES_IMAGE_BUILD_BACKEND``, else the first that can."""
    alias = settings.INSTANCES_IMAGE_BUILD_BACKEND
    found = [get_backend(name) for name in ([alias] if alias else backend_aliases())]
    # A real builder before the simulated cloud's, which pushes nothing (a console running both).
    for backend in sorted((b for b in found if b.supports_image_build), key=lambda b: bool(b.simulated)):
        return backend
    raise ImageBuildNotSupported(_("This console has no image builder: its operator runs one on a podman host."))


def build_limits() -> BuildLimits:
    return BuildLimits(
        cpus=settings.INSTANCES_IMAGE_BUILD_CPUS,
        memory_gb=settings.INSTANCES_IMAGE_BUILD_MEMORY_GB,
        pids=settings.INSTANCES_IMAGE_BUILD_PIDS,
        timeout_s=settings.INSTANCES_IMAGE_BUILD_TIMEOUT_S,
        network=settings.INSTANCES_IMAGE_BUILD_NETWORK,
    )


def image_build(*, principal, membership, actor, recipe: str, name: str, tag: str = "latest", note: str = "") -> Image:
    """Start building ``recipe`` as image ``name:tag`` of account ``principal``: checked first
    (``recipe_check``), then an Image BUILDING that the worker builds (``image_build_execute``)."""
    name, tag, note = (name or "").strip(), (tag or "latest").strip(), (note or "").strip()
    recipe = recipe.replace("\r\n", "\n")  # a browser's textarea sends CRLF
    _check_name_tag(name, tag)
    if len(note) > 500:
        raise LaunchInvalid(_("The note is at most 500 characters."), field="note")
    address = (settings.CONSOLE_REGISTRY or "").strip().rstrip("/")
    if not address:
        raise ImageBuildNotSupported(
            _("This console has no registry to keep built images in: its operator sets CONSOLE_REGISTRY.")
        )
    base = recipe_check(recipe, principal=principal, membership=membership, user=actor)
    _builder()  # refused now, not after the wait, when nothing can build
    image = Image(
        slug=f"img-{uuid.uuid4().hex[:16]}",
        name=name,
        tag=tag,
        note=note,
        owner_id=principal.pk,
        created_by=actor,
        status=Image.Status.BUILDING,
        is_active=False,
        framework=base.framework,
        framework_version=base.framework_version,
        cuda_version=base.cuda_version,
        python_version=base.python_version,
        os=base.os,
        contents={**(base.contents or {}), "built_from": base.slug},
        repository=f"{address}/{_namespace(principal)}/{name}",
        recipe=recipe,
    )
    try:
        with transaction.atomic():
            image.save(force_insert=True)
    except IntegrityError as exc:
        raise ImageExists(
            _("You already have an image %(name)s:%(tag)s: choose another name or tag, or delete that one.")
            % {"name": name, "tag": tag}
        ) from exc
    enqueue_on_commit("instances.tasks.image_build_task", image.pk)
    return image


def _log_write(image_id: int, text: str) -> None:
    limit = settings.INSTANCES_IMAGE_BUILD_LOG_BYTES
    Image.objects.filter(pk=image_id, status=Image.Status.BUILDING).update(build_log=text[-limit:])


def image_build_execute(*, image_id: int) -> None:
    """The worker's half of a build: have the builder build and push the recipe, then READY and billed
    (``image_ready_bill``). Only a BUILDING image is acted on; a permanent refusal (the build failed,
    or ran past its time) fails it with the builder's words; a transient one is raised for a retry."""
    image = Image.objects.filter(pk=image_id).first()
    if image is None or image.status != Image.Status.BUILDING:
        return
    try:
        built = _builder().image_build(
            recipe=image.recipe,
            repository=image.repository,
            tag=image.tag,
            tenant=tenant_for(account_id=image.owner_id),
            limits=build_limits(),
            progress=lambda text: _log_write(image_id, text),
        )
    except PermanentBackendError as exc:
        image_build_fail(image_id=image_id, error=str(exc))
        return
    except ImageBuildNotSupported as exc:
        image_build_fail(image_id=image_id, error=exc.message)
        return
    if built.get("log"):
        _log_write(image_id, str(built["log"]))
    image_ready_bill(
        image=image, digest=str(built["digest"]), size=int(built["size_bytes"]), status=Image.Status.BUILDING
    )


def image_build_fail(*, image_id: int, error: str, statuses: tuple = ()) -> None:
    """Settle a build that cannot finish: FAILED with ``error`` (the log's tail) as its reason. Nothing was
    billed (the meter opens at READY)."""
    Image.objects.filter(pk=image_id, status=Image.Status.BUILDING).update(
        status=Image.Status.FAILED, status_reason=error[-2000:]
    )


def images_building_repair(*, now=None) -> dict:
    """The reconciler's pass over builds whose worker vanished: one BUILDING for longer than its time
    limit and ``INSTANCES_IMAGE_BUILD_GRACE_S`` fails with why (the builder kills its own build at the
    limit, so nothing still runs it)."""
    now = now or timezone.now()
    limit = settings.INSTANCES_IMAGE_BUILD_TIMEOUT_S + settings.INSTANCES_IMAGE_BUILD_GRACE_S
    stale = Image.objects.filter(status=Image.Status.BUILDING, created_at__lt=now - timedelta(seconds=limit))
    failed = 0
    for image_id in stale.values_list("pk", flat=True):
        image_build_fail(
            image_id=image_id, error=stored(gettext_noop("The build did not finish in time; build it again."))
        )
        failed += 1
    return {"builds_failed": failed}
