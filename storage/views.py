"""The storage pages: the volume list (with the create form), a volume's page (resize, attach, detach,
delete), and a volume's file browser. Each view serves its page or, for htmx, the partial it is made of.

All in the acting context (``teams.access``): the principal's volumes; creating needs
``resources.launch``; resizing, deleting and detaching need OPERATE on the volume (its creator, or a
team admin); attaching needs OPERATE on the instance, so a member attaches any team volume to their own
team instance. A volume shown but not operable has no buttons, and a forced POST is a 403."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from core import files as core_files
from instances.errors import InstanceError
from instances.models import Instance
from storage import files, selectors, services
from storage.forms import AttachForm, VolumeCreateForm, VolumeResizeForm
from storage.models import Volume
from teams.access import (
    Access,
    principal_access,
    request_acting,
    request_can,
    require_access,
    require_permission,
)
from teams.roles import Permission

CHUNK = core_files.CHUNK  # what the file page sends per request (a module attribute: tests shrink it)


def _may_create_message() -> str:
    return _("Your role in this team does not allow creating volumes or attaching them.")


def _operate_message() -> str:
    return _("Only the volume's creator or a team admin can change it.")


def _principal(request: HttpRequest):
    return request_acting(request)[0]


def _volume(request: HttpRequest, pk, *, operate: bool = False) -> Volume:
    """The acting account's volume (404 otherwise), with ``can_operate`` for the page; 403 when
    ``operate`` is asked of a person who may only see it."""
    volume = selectors.volume_get_for(user=_principal(request), volume_id=pk)
    access = require_access(
        request,
        owner_id=volume.owner_id,
        created_by_id=volume.created_by_id,
        operate=operate,
        message=_operate_message(),
    )
    volume.can_operate = access == Access.OPERATE
    return volume


def _with_detach(request: HttpRequest, volume: Volume, operable: QuerySet[Instance]) -> list:
    """The volume's attachments, each with ``can_detach``: the volume's operator may detach any, anyone
    else those on instances they operate."""
    attachments = list(volume.attachments.all())
    mine = set() if volume.can_operate else set(operable.values_list("pk", flat=True))
    for attachment in attachments:
        attachment.can_detach = volume.can_operate or attachment.instance_id in mine
    return attachments


def _operable_instances(request: HttpRequest, volume: Volume) -> QuerySet[Instance]:
    """Instances this person may attach the volume to: live, in its region, and theirs to operate."""
    instances = selectors.attachable_instances_for(user=_principal(request), volume=volume)
    if not request_acting(request)[1]:
        return instances
    ids = [
        i.pk
        for i in instances
        if principal_access(request, owner_id=i.owner_id, created_by_id=i.created_by_id) == Access.OPERATE
    ]
    return instances.filter(pk__in=ids)


def _with_cost(volumes: list[Volume]) -> dict:
    costs = selectors.volume_costs(volumes=volumes)
    for volume in volumes:
        volume.cost = costs[volume.pk]
    return costs


@login_required
def volume_list(request: HttpRequest) -> HttpResponse:
    require_permission(request, Permission.RESOURCES_VIEW, _("Your role in this team does not show its resources."))
    principal = _principal(request)
    may_create = request_can(request, Permission.RESOURCES_LAUNCH)
    if request.method == "POST":
        require_permission(request, Permission.RESOURCES_LAUNCH, _may_create_message())
    regions = selectors.volume_regions()
    form = VolumeCreateForm(request.POST or None, regions=regions)
    if request.method == "POST" and form.is_valid():
        try:
            volume = services.volume_create(user=principal, actor=request.user, **form.cleaned_data)
        except InstanceError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            messages.success(request, _("%(name)s is being created.") % {"name": volume.name})
            return redirect("storage")
    volumes = list(selectors.volume_list_for(user=principal))
    for volume in volumes:
        volume.can_operate = (
            principal_access(request, owner_id=volume.owner_id, created_by_id=volume.created_by_id) == Access.OPERATE
        )
    costs = _with_cost(volumes)
    summary = selectors.storage_summary_for(user=principal, volumes=volumes, costs=costs)
    return render(
        request,
        "storage/list.html",
        {
            "volumes": volumes,
            "form": form,
            "summary": summary,
            "has_regions": bool(regions),
            "may_create": may_create,
        },
    )


@login_required
def volume_detail(request: HttpRequest, pk) -> HttpResponse:
    volume = _volume(request, pk)
    _with_cost([volume])
    if request.GET.get("partial") == "row":
        return render(request, "storage/_volume_row.html", {"volume": volume})
    instances = _operable_instances(request, volume)
    may_attach = request_can(request, Permission.RESOURCES_LAUNCH)
    context = {
        "volume": volume,
        "attachments": _with_detach(request, volume, instances),
        "events": list(volume.events.order_by("-created_at", "-id")[:20]),
        "resize_form": VolumeResizeForm(initial={"size_gb": volume.size_gb * 2}),
        "attach_form": AttachForm(instances=instances),
        "has_instances": may_attach and instances.exists(),
        "may_attach": may_attach,
        "mount_roots": ", ".join(settings.STORAGE_MOUNT_ROOTS),
    }
    return render(request, "storage/detail.html", context)


def _back(request: HttpRequest, volume: Volume, error: str = "") -> HttpResponse:
    if request.htmx and request.POST.get("from") == "list":
        volume = _volume(request, volume.pk)
        _with_cost([volume])
        return render(request, "storage/_volume_row.html", {"volume": volume, "error": error})
    if error:
        messages.error(request, error)
    if request.POST.get("from") == "list" or volume.status in (Volume.Status.DELETING, Volume.Status.DELETED):
        return redirect("storage")
    return redirect("volume_detail", pk=volume.pk)


@login_required
@require_POST
def volume_resize(request: HttpRequest, pk) -> HttpResponse:
    volume = _volume(request, pk, operate=True)
    form = VolumeResizeForm(request.POST)
    if not form.is_valid():
        return _back(request, volume, _("Give the new size in GB."))
    try:
        volume = services.volume_resize(volume=volume, size_gb=form.cleaned_data["size_gb"])
    except InstanceError as exc:
        return _back(request, volume, exc.message)
    messages.success(
        request, _("Growing %(name)s to %(size)d GB.") % {"name": volume.name, "size": volume.resize_to_gb}
    )
    return _back(request, volume)


@login_required
@require_POST
def volume_delete(request: HttpRequest, pk) -> HttpResponse:
    volume = _volume(request, pk, operate=True)
    try:
        volume = services.volume_delete(volume=volume, actor=request.user)
    except InstanceError as exc:
        return _back(request, volume, exc.message)
    if not request.htmx:
        messages.success(request, _("%(name)s is being deleted with its files.") % {"name": volume.name})
    return _back(request, volume)


@login_required
@require_POST
def volume_attach(request: HttpRequest, pk) -> HttpResponse:
    volume = _volume(request, pk)
    require_permission(request, Permission.RESOURCES_LAUNCH, _may_create_message())
    form = AttachForm(request.POST, instances=_operable_instances(request, volume))
    if not form.is_valid():
        errors = [e for field_errors in form.errors.values() for e in field_errors]
        return _back(request, volume, " ".join(errors))
    data = form.cleaned_data
    try:
        attachment = services.volume_attach(
            user=_principal(request),
            volume=volume,
            instance=data["instance"],
            mount_path=data["mount_path"],
            mode=data["mode"],
            actor=request.user,
        )
    except InstanceError as exc:
        return _back(request, volume, exc.message)
    messages.success(
        request,
        _("Attached to %(instance)s at %(path)s; it is mounted when the instance next starts or restarts.")
        % {"instance": attachment.instance.name, "path": attachment.mount_path},
    )
    return _back(request, volume)


@login_required
@require_POST
def volume_detach(request: HttpRequest, pk, attachment_id: int) -> HttpResponse:
    volume = _volume(request, pk)
    attachment = selectors.attachment_get_for(user=_principal(request), volume=volume, attachment_id=attachment_id)
    instance = attachment.instance
    # The volume's operator, or the instance's (a member takes a team volume off their own instance).
    if not volume.can_operate:
        require_access(
            request,
            owner_id=instance.owner_id,
            created_by_id=instance.created_by_id,
            operate=True,
            message=_operate_message(),
        )
    if services.volume_detach(attachment=attachment) is None:
        messages.success(request, _("Detached from %(instance)s.") % {"instance": attachment.instance.name})
    else:
        messages.success(
            request,
            _("Detached from %(instance)s: it stays mounted there until the instance stops or restarts.")
            % {"instance": attachment.instance.name},
        )
    return _back(request, volume)


# --- A volume's files ------------------------------------------------------------------------------


@login_required
def volume_files(request: HttpRequest, pk) -> HttpResponse:
    """The volume's file browser: a shell (upload, new folder) whose folder listing is an htmx partial
    (``?partial=listing``), as the instance's (``gateway.views``); changes go through the volume files
    API from ``static/js/files.js``. Seeing the volume lets one browse and download; operating it, change."""
    volume = _volume(request, pk)
    path = request.GET.get("path", "")
    if request.GET.get("partial") == "listing":
        return _files_listing(request, volume, path=path)
    unavailable = ""
    if not volume.can_attach():
        unavailable = _("The volume's files can be reached while it is available; it is %(status)s.") % {
            "status": volume.get_status_display().lower()
        }
    context = {
        "volume": volume,
        "unavailable": unavailable,
        "path": path,
        "chunk": CHUNK,
        "strings": core_files.browser_strings(),
        "can_change": volume.can_operate,
        "listing_url": reverse("volume_files", args=[volume.pk]),
        "api": {
            "files": reverse("api-volume-files", args=[volume.pk]),
            "stat": reverse("api-volume-file-stat", args=[volume.pk]),
            "folder": reverse("api-volume-folder", args=[volume.pk]),
            "content": reverse("api-volume-file-content", args=[volume.pk]),
        },
    }
    return render(request, "storage/files.html", context)


def _files_listing(request: HttpRequest, volume: Volume, *, path: str) -> HttpResponse:
    context = {
        "volume": volume,
        "error": "",
        "hint": "",
        "path": "/",
        "rows": [],
        "crumbs": core_files.crumbs("/"),
        "can_change": volume.can_operate,
        "listing_url": reverse("volume_files", args=[volume.pk]),
        "download_url": reverse("api-volume-file-content", args=[volume.pk]),
    }
    try:
        where, entries = files.volume_files_list(volume=volume, path=path)
    except core_files.FilesRefused as exc:
        context["error"] = exc.message
        if exc.code == "unavailable":
            context["elsewhere"] = files.volume_browse_elsewhere(volume=volume)
            context["hint"] = _elsewhere_hint(context["elsewhere"])
    else:
        context["path"], context["crumbs"] = where, core_files.crumbs(where)
        context["rows"] = [
            _Row(
                entry=e,
                path=posixpath.join(where, e.name),
                modified_at=datetime.fromtimestamp(e.modified, tz=UTC) if e.modified else None,
            )
            for e in entries
        ]
    return render(request, "files/_listing.html", context)


def _elsewhere_hint(mounted: list) -> str:
    """Where to browse a volume whose files are not on the console's host: an instance mounting it."""
    if not mounted:
        return _(
            "Attach it to an instance and start it, then browse it from that instance's Files page at the mount path."
        )
    return _("It is mounted on a running instance: browse it from that instance's files, at the mount path.")


@dataclass(frozen=True)
class _Row:
    """A listing's row: the volume's files are streamed, so every file gets its download link."""

    entry: core_files.Entry
    path: str
    modified_at: datetime | None

    @property
    def downloadable(self) -> bool:
        return self.entry.type == "file"
