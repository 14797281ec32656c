"""Images accounts save from their instances ("Save as image"): save, rename, share, delete, and the
worker's half of a save.

A save is an ``Image`` row owned by the instance's account, SAVING until the worker has had the
provider commit the machine and push it to the console's registry under the account's repository
(``users/u<id>/<name>`` or ``teams/<slug>/<name>``); then READY, with the registry's digest (what a
launch from it pins) and size, and billed per GB-day (``image_meter_ref``) until it is deleted. What
it keeps is the machine's system: packages and files outside its disk (``/home/user``) and volumes,
which are mounts and not part of the image (the README's "Save as image" says so too).

Every verb starts with its guard, so a repeat does nothing more: the worker's ``image_save_execute``
acts only on a SAVING image and finishes it with a compare-and-set; the meter opens once per ref.
"""

from __future__ import annotations

import logging
import math
import re
import uuid
from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from billing.models import Sku
from billing.services import meter_open, meter_stop, sku_upsert
from core.messages import reason as stored
from core.tasks import enqueue_on_commit
from instances.errors import ImageExists, ImageInUse, ImageSaveNotSupported, LaunchInvalid, OperationNotAllowed
from instances.models import Image, Instance
from instances.registry import Registry, RegistryError
from providers import PermanentBackendError, get_backend
from teams.models import Team, TeamEvent
from teams.services import team_event_record

NAME_RE = re.compile(r"[a-z0-9]+(?:[._-][a-z0-9]+)*")
TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
logger = logging.getLogger(__name__)
IMAGE_SKU_CODE = "image.gb"
# The machine must be still (stopped) or up (running) to be committed: not booting, moving or going.
SAVABLE = (Instance.Status.RUNNING, Instance.Status.STOPPED)
# A machine in any other status still needs its image (it runs, or may run again).
DONE_WITH_IMAGE = (Instance.Status.RELEASED, Instance.Status.FAILED, Instance.Status.LOST)
# Where the simulated cloud "pushes" when no registry is configured (nothing is pushed there).
SIMULATED_REGISTRY = "registry.simulated.invalid"


def image_meter_ref(image_id) -> str:
    return f"image:{image_id}:storage"


def image_sku_upsert() -> Sku:
    """Storage, per GB-day: billing keeps it running when the money runs out, as a disk's."""
    price = settings.INSTANCES_IMAGE_PRICE_FEN_PER_GB_DAY
    sku = Sku.objects.filter(code=IMAGE_SKU_CODE).first()
    if sku is not None and sku.price_fen == price and sku.unit_seconds == 86400 and sku.is_storage:
        return sku
    return sku_upsert(
        code=IMAGE_SKU_CODE, name="Saved image", unit="GB-day", price_fen=price, unit_seconds=86400, is_storage=True
    )


def image_billed_gb(size_bytes: int) -> int:
    """Whole GB (GiB) billed for an image of ``size_bytes``: rounded up, at least 1."""
    return max(1, math.ceil(size_bytes / 2**30))


def _namespace(owner) -> str:
    """The account's folder in the registry: its team's slug, or ``u<id>`` for a person."""
    slug = Team.objects.filter(account_id=owner.pk).values_list("slug", flat=True).first()
    return f"teams/{slug.lower()}" if slug else f"users/u{owner.pk}"


def _registry_address(backend) -> str:
    address = (settings.CONSOLE_REGISTRY or "").strip().rstrip("/")
    if address:
        return address
    if backend.simulated:
        return SIMULATED_REGISTRY
    raise ImageSaveNotSupported(
        _("This console has no registry to keep saved images in: its operator sets CONSOLE_REGISTRY.")
    )


def _check_name_tag(name: str, tag: str) -> None:
    if not (1 <= len(name) <= 64 and NAME_RE.fullmatch(name)):
        raise LaunchInvalid(
            _("An image's name is 1 to 64 lower-case letters and digits, with . _ - between them."), field="name"
        )
    if not TAG_RE.fullmatch(tag):
        raise LaunchInvalid(_("A tag is 1 to 128 letters, digits, . _ and -, not starting with . or -."), field="tag")


def image_save(*, instance: Instance, actor, name: str, tag: str = "latest", note: str = "") -> Image:
    """Start saving ``instance`` (running or stopped) as image ``name:tag`` of its account; the worker
    commits and pushes it (``image_save_execute``). Refused in any other status, on a provider that
    cannot save machines, or when the account already has a live image of that name and tag."""
    name, tag, note = (name or "").strip(), (tag or "latest").strip(), (note or "").strip()
    _check_name_tag(name, tag)
    if len(note) > 500:
        raise LaunchInvalid(_("The note is at most 500 characters."), field="note")
    if instance.status not in SAVABLE:
        raise OperationNotAllowed(_("Only a running or stopped instance can be saved as an image."))
    backend = get_backend(instance.backend_alias)
    if not backend.supports_image_save:
        raise ImageSaveNotSupported(_("This instance's region cannot save machines as images."))
    address = _registry_address(backend)
    source = instance.image
    image = Image(
        slug=f"img-{uuid.uuid4().hex[:16]}",
        name=name,
        tag=tag,
        note=note,
        owner_id=instance.owner_id,
        created_by=actor,
        source_instance=instance,
        status=Image.Status.SAVING,
        is_active=False,  # never in the catalogue
        framework=source.framework,
        framework_version=source.framework_version,
        cuda_version=source.cuda_version,
        python_version=source.python_version,
        os=source.os,
        contents={**(source.contents or {}), "saved_from": source.slug},
        repository=f"{address}/{_namespace(instance.owner)}/{name}",
    )
    try:
        with transaction.atomic():
            image.save(force_insert=True)
            team_event_record(
                account=instance.owner_id,
                actor=actor,
                action=TeamEvent.Action.IMAGE_SAVED,
                target=f"{name}:{tag}",
                details={"image": image.slug, "instance": str(instance.pk)},
            )
    except IntegrityError as exc:
        raise ImageExists(
            _("You already have an image %(name)s:%(tag)s: choose another name or tag, or delete that one.")
            % {"name": name, "tag": tag}
        ) from exc
    enqueue_on_commit("instances.tasks.image_save_task", image.pk)
    return image


def image_save_execute(*, image_id: int) -> None:
    """The worker's half of a save: have the provider commit the machine and push it, then mark the image
    READY with its digest and size and open its meter. Only a SAVING image is acted on. A permanent
    refusal fails the image with the provider's words; a transient one is raised for the task to retry."""
    image = Image.objects.select_related("source_instance").filter(pk=image_id).first()
    if image is None or image.status != Image.Status.SAVING:
        return
    instance = image.source_instance
    if instance is None or instance.status in DONE_WITH_IMAGE:
        image_save_fail(image_id=image_id, error=stored(gettext_noop("The instance no longer exists.")))
        return
    repository, tag = image.repository, image.tag
    try:
        saved = get_backend(instance.backend_alias).image_save(
            key=instance.key, state=instance.backend_state, repository=repository, tag=tag
        )
    except PermanentBackendError as exc:
        image_save_fail(image_id=image_id, error=str(exc))
        return
    image_ready_bill(
        image=image,
        digest=str(saved["digest"]),
        size=int(saved["size_bytes"]),
        status=Image.Status.SAVING,
        recipe=str(saved.get("recipe") or ""),
    )


def image_ready_bill(*, image: Image, digest: str, size: int, status: str, recipe: str | None = None) -> bool:
    """Mark ``image`` READY with its digest and size (a compare-and-set from ``status``: SAVING or
    BUILDING) and open its meter, in one transaction; ``recipe``, when given, is stored with it. Returns
    whether this call moved it (a repeat does nothing)."""
    fields = {"status": Image.Status.READY, "digest": digest, "size_bytes": size, "status_reason": ""}
    if recipe is not None:
        fields["recipe"] = recipe
    with transaction.atomic():
        moved = Image.objects.filter(pk=image.pk, status=status).update(**fields)
        if moved:
            meter_open(
                user=image.owner,
                sku=image_sku_upsert(),
                quantity=image_billed_gb(size),
                ref=image_meter_ref(image.pk),
                description=f"Image {image.name}:{image.tag} ({image_billed_gb(size)} GB)",
                at=timezone.now(),
            )
    return bool(moved)


def image_save_fail(*, image_id: int, error: str, statuses: tuple = ()) -> None:
    """Settle a save that cannot finish (``OperationTask``'s ``fails``, or a permanent refusal): FAILED with
    ``error`` as its reason. Nothing was billed (the meter opens at READY)."""
    Image.objects.filter(pk=image_id, status=Image.Status.SAVING).update(
        status=Image.Status.FAILED, status_reason=error[:2000]
    )


def image_registry_delete(*, image_id: int) -> bool:
    """Take a deleted image's manifest out of the console's registry (its blobs go at the registry's
    garbage collection). Only when no other live image names the same digest (a save of nothing new,
    under another tag, is the same manifest), and only on the registry this console is configured with.
    Best effort: the image is deleted for its owner and its bill whatever the registry says."""
    image = Image.objects.filter(pk=image_id, status=Image.Status.DELETED).first()
    address = (settings.CONSOLE_REGISTRY or "").strip().rstrip("/")
    if image is None or not image.digest or not address or not image.repository.startswith(address + "/"):
        return False
    if image.imported_from:
        return False  # an imported image is its owner's, in their repository: the console pushed nothing
    if Image.objects.filter(digest=image.digest).exclude(status=Image.Status.DELETED).exists():
        return False
    try:
        return Registry.from_settings().manifest_delete(image.repository, image.digest)
    except RegistryError:
        logger.warning("the registry kept %s@%s", image.repository, image.digest, exc_info=True)
        return False


def images_saving_repair(*, now=None) -> dict:
    """The reconciler's pass over saves whose task vanished (a worker killed, a message lost): a save
    SAVING for longer than ``INSTANCES_IMAGE_SAVE_REDRIVE_S`` is enqueued again (once per that period;
    the task acts only on a SAVING image, and the host's per-instance lock keeps two from pushing at
    once); one SAVING past ``INSTANCES_IMAGE_SAVE_DEADLINE_S`` fails with why. Returns the counts."""
    now = now or timezone.now()
    saving = Image.objects.filter(status=Image.Status.SAVING)
    deadline = now - timedelta(seconds=settings.INSTANCES_IMAGE_SAVE_DEADLINE_S)
    failed = 0
    for image_id in saving.filter(created_at__lt=deadline).values_list("pk", flat=True):
        image_save_fail(
            image_id=image_id, error=stored(gettext_noop("The save did not finish in time; save it again."))
        )
        failed += 1
    redriven = 0
    stale = now - timedelta(seconds=settings.INSTANCES_IMAGE_SAVE_REDRIVE_S)
    for image_id in saving.filter(created_at__lt=stale).values_list("pk", flat=True):
        if cache.add(f"instances:image-save-redrive:{image_id}", 1, timeout=settings.INSTANCES_IMAGE_SAVE_REDRIVE_S):
            enqueue_on_commit("instances.tasks.image_save_task", image_id)
            redriven += 1
    return {"images_failed": failed, "images_redriven": redriven}


def image_rename(*, image: Image, name: str | None = None, note: str | None = None) -> Image:
    """Change the name shown for ``image`` (its pushed repository and pinned digest stay) or its note."""
    if image.status == Image.Status.DELETED:
        raise OperationNotAllowed(_("This image was deleted."))
    fields = []
    if name is not None:
        name = name.strip()
        _check_name_tag(name, image.tag)
        image.name = name
        fields.append("name")
    if note is not None:
        if len(note.strip()) > 500:
            raise LaunchInvalid(_("The note is at most 500 characters."), field="note")
        image.note = note.strip()
        fields.append("note")
    if fields:
        try:
            with transaction.atomic():
                image.save(update_fields=fields)
        except IntegrityError as exc:
            raise ImageExists(
                _("You already have an image %(name)s:%(tag)s: choose another name or tag, or delete that one.")
                % {"name": image.name, "tag": image.tag}
            ) from exc
    return image


def image_share(*, image: Image, shared: bool, actor=None) -> Image:
    """Show ``image`` to every member of its team (who may then launch from it), or only to the member
    who saved it and the team's admins again. On a personal account it changes nothing anyone sees.
    ``actor``: who asked, for the team's audit log."""
    if image.status == Image.Status.DELETED:
        raise OperationNotAllowed(_("This image was deleted."))
    with transaction.atomic():
        if Image.objects.filter(pk=image.pk).exclude(shared=shared).update(shared=shared) and actor is not None:
            team_event_record(
                account=image.owner_id,
                actor=actor,
                action=TeamEvent.Action.IMAGE_SHARED,
                target=f"{image.name}:{image.tag}",
                details={"image": image.slug, "shared": shared},
            )
    image.shared = shared
    return image


def image_delete(*, image: Image, actor=None) -> Image:
    """Delete ``image``: refused while any instance that may still run uses it (409 ``image_in_use``) or
    while it is being saved. Its meter closes; the row stays (instances that ran it point at it).
    ``actor``: who asked, for the team's audit log."""
    if image.owner_id is None:
        raise OperationNotAllowed(_("Catalogue images are not deleted here."))
    if image.status == Image.Status.SAVING:
        raise OperationNotAllowed(_("The image is still being saved: delete it once it is ready or failed."))
    if image.status == Image.Status.BUILDING:
        raise OperationNotAllowed(_("The image is still being built: delete it once it is ready or failed."))
    with transaction.atomic():
        # Locked first, counted after: a launch of it holds the row until it commits its instance
        # (``instances.services.launch``), so no launch slips in between the count and the delete.
        list(Image.objects.select_for_update().filter(pk=image.pk).values_list("pk", flat=True))
        users = Instance.objects.filter(image=image).exclude(status__in=DONE_WITH_IMAGE)
        names = list(users.values_list("name", flat=True)[:3])
        if names:
            raise ImageInUse(
                _("Instances use this image (%(names)s): release them first.") % {"names": ", ".join(names)}
            )
        moved = (
            Image.objects.filter(pk=image.pk)
            .exclude(status=Image.Status.DELETED)
            .update(status=Image.Status.DELETED, is_active=False)
        )
        if moved:
            meter_stop(ref=image_meter_ref(image.pk))
            if actor is not None:
                team_event_record(
                    account=image.owner_id,
                    actor=actor,
                    action=TeamEvent.Action.IMAGE_DELETED,
                    target=f"{image.name}:{image.tag}",
                    details={"image": image.slug},
                )
            enqueue_on_commit("instances.tasks.image_registry_delete_task", image.pk)
    image.status = Image.Status.DELETED
    return image
