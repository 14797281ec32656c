"""The storage pages: the volume list (with the create form), a volume's page (resize, attach, detach,
delete). Each view serves its page or, for htmx, the row partial it is made of."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from instances.errors import InstanceError
from storage import selectors, services
from storage.forms import AttachForm, VolumeCreateForm, VolumeResizeForm
from storage.models import Volume


def _with_cost(volumes: list[Volume]) -> dict:
    costs = selectors.volume_costs(volumes=volumes)
    for volume in volumes:
        volume.cost = costs[volume.pk]
    return costs


@login_required
def volume_list(request: HttpRequest) -> HttpResponse:
    regions = selectors.volume_regions()
    form = VolumeCreateForm(request.POST or None, regions=regions)
    if request.method == "POST" and form.is_valid():
        try:
            volume = services.volume_create(user=request.user, **form.cleaned_data)
        except InstanceError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            messages.success(request, _("%(name)s is being created.") % {"name": volume.name})
            return redirect("storage")
    volumes = list(selectors.volume_list_for(user=request.user))
    costs = _with_cost(volumes)
    summary = selectors.storage_summary_for(user=request.user, volumes=volumes, costs=costs)
    return render(
        request,
        "storage/list.html",
        {"volumes": volumes, "form": form, "summary": summary, "has_regions": bool(regions)},
    )


@login_required
def volume_detail(request: HttpRequest, pk) -> HttpResponse:
    volume = selectors.volume_get_for(user=request.user, volume_id=pk)
    _with_cost([volume])
    if request.GET.get("partial") == "row":
        return render(request, "storage/_volume_row.html", {"volume": volume})
    instances = selectors.attachable_instances_for(user=request.user, volume=volume)
    context = {
        "volume": volume,
        "attachments": list(volume.attachments.all()),
        "events": list(volume.events.order_by("-created_at", "-id")[:20]),
        "resize_form": VolumeResizeForm(initial={"size_gb": volume.size_gb * 2}),
        "attach_form": AttachForm(instances=instances),
        "has_instances": instances.exists(),
        "mount_roots": ", ".join(settings.STORAGE_MOUNT_ROOTS),
    }
    return render(request, "storage/detail.html", context)


def _back(request: HttpRequest, volume: Volume, error: str = "") -> HttpResponse:
    if request.htmx and request.POST.get("from") == "list":
        volume = selectors.volume_get_for(user=request.user, volume_id=volume.pk)
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
    volume = selectors.volume_get_for(user=request.user, volume_id=pk)
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
    volume = selectors.volume_get_for(user=request.user, volume_id=pk)
    try:
        volume = services.volume_delete(volume=volume)
    except InstanceError as exc:
        return _back(request, volume, exc.message)
    if not request.htmx:
        messages.success(request, _("%(name)s is being deleted with its files.") % {"name": volume.name})
    return _back(request, volume)


@login_required
@require_POST
def volume_attach(request: HttpRequest, pk) -> HttpResponse:
    volume = selectors.volume_get_for(user=request.user, volume_id=pk)
    form = AttachForm(request.POST, instances=selectors.attachable_instances_for(user=request.user, volume=volume))
    if not form.is_valid():
        errors = [e for field_errors in form.errors.values() for e in field_errors]
        return _back(request, volume, " ".join(errors))
    data = form.cleaned_data
    try:
        attachment = services.volume_attach(
            user=request.user,
            volume=volume,
            instance=data["instance"],
            mount_path=data["mount_path"],
            mode=data["mode"],
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
    volume = selectors.volume_get_for(user=request.user, volume_id=pk)
    attachment = selectors.attachment_get_for(user=request.user, volume=volume, attachment_id=attachment_id)
    if services.volume_detach(attachment=attachment) is None:
        messages.success(request, _("Detached from %(instance)s.") % {"instance": attachment.instance.name})
    else:
        messages.success(
            request,
            _("Detached from %(instance)s: it stays mounted there until the instance stops or restarts.")
            % {"instance": attachment.instance.name},
        )
    return _back(request, volume)
