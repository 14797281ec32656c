"""The "Service ports" card of the instance page (loaded by htmx) and its forms: add or remove a port,
make or revoke a share link. Each answers with the card again for htmx, or goes back to the page."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from instances.models import Instance
from ports import selectors, services
from ports.errors import PortRefused
from ports.forms import PortForm, ShareForm


def _card(request: HttpRequest, instance: Instance, *, error: str = "", form: PortForm | None = None) -> HttpResponse:
    context = {
        "instance": instance,
        "ports": selectors.ports_for(instance=instance),
        "port_form": form or PortForm(),
        "share_form": ShareForm(),
        "error": error,
        "running": instance.status == Instance.Status.RUNNING,
    }
    return render(request, "ports/_card.html", context)


def _back(request: HttpRequest, instance: Instance, *, error: str = "", form: PortForm | None = None) -> HttpResponse:
    if request.htmx:
        return _card(request, instance, error=error, form=form)
    if error:
        messages.error(request, error)
    return redirect("instance_detail", pk=instance.pk)


@login_required
@require_GET
def ports_card(request: HttpRequest, pk) -> HttpResponse:
    return _card(request, selectors.instance_get_for(user=request.user, instance_id=pk))


@login_required
@require_POST
def port_add(request: HttpRequest, pk) -> HttpResponse:
    instance = selectors.instance_get_for(user=request.user, instance_id=pk)
    form = PortForm(request.POST)
    if not form.is_valid():
        return _back(request, instance, error=" ".join(e for errs in form.errors.values() for e in errs), form=form)
    try:
        services.port_declare(instance=instance, port=form.cleaned_data["port"], name=form.cleaned_data["name"])
    except PortRefused as exc:
        return _back(request, instance, error=exc.message, form=form)
    return _back(request, instance)


@login_required
@require_POST
def port_remove(request: HttpRequest, pk, port_id: int) -> HttpResponse:
    port = selectors.port_get_for(user=request.user, instance_id=pk, port_id=port_id)
    services.port_remove(port=port)
    return _back(request, port.instance)


@login_required
@require_POST
def share_add(request: HttpRequest, pk, port_id: int) -> HttpResponse:
    port = selectors.port_get_for(user=request.user, instance_id=pk, port_id=port_id)
    form = ShareForm(request.POST)
    if not form.is_valid():
        return _back(request, port.instance, error=" ".join(e for errs in form.errors.values() for e in errs))
    try:
        services.share_create(port=port, label=form.cleaned_data["label"], expires_at=form.expires_at())
    except PortRefused as exc:
        return _back(request, port.instance, error=exc.message)
    return _back(request, port.instance)


@login_required
@require_POST
def share_revoke(request: HttpRequest, pk, port_id: int, share_id: int) -> HttpResponse:
    port = selectors.port_get_for(user=request.user, instance_id=pk, port_id=port_id)
    services.share_revoke(share=selectors.share_get_for(user=request.user, port=port, share_id=share_id))
    return _back(request, port.instance)


@login_required
@require_GET
def port_state(request: HttpRequest, pk, port_id: int) -> HttpResponse:
    """The port's state badge (answering or not), loaded by htmx after the card."""
    port = selectors.port_get_for(user=request.user, instance_id=pk, port_id=port_id)
    return render(request, "ports/_state.html", {"answering": selectors.port_answering(port=port)})
