"""The "Service ports" card of the instance page (loaded by htmx) and its forms: add or remove a port,
make or revoke a share link. Each answers with the card again for htmx, or goes back to the page.

In the acting context (``teams.access``): the card of any instance the person may see; adding,
removing and sharing need OPERATE on the instance (its creator, or a team admin): no forms for the
others, and a forced POST is a 403. Share links are secrets: only an operator sees their URLs."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from instances.models import Instance
from ports import selectors, services
from ports.errors import PortRefused
from ports.forms import PortForm, ShareForm
from ports.models import InstancePort
from teams.access import Access, request_acting, require_access


def _operate_message() -> str:
    return _("Only the instance's creator or a team admin can change its ports.")


def _check(request: HttpRequest, instance: Instance, *, operate: bool) -> Instance:
    """404 unless the person may see the instance here; 403 when ``operate`` is asked of a viewer."""
    access = require_access(
        request,
        owner_id=instance.owner_id,
        created_by_id=instance.created_by_id,
        operate=operate,
        message=_operate_message(),
    )
    instance.can_operate = access == Access.OPERATE
    return instance


def _instance(request: HttpRequest, pk, *, operate: bool = False) -> Instance:
    instance = selectors.instance_get_for(user=request_acting(request)[0], instance_id=pk)
    return _check(request, instance, operate=operate)


def _port(request: HttpRequest, pk, port_id: int, *, operate: bool = False) -> InstancePort:
    port = selectors.port_get_for(user=request_acting(request)[0], instance_id=pk, port_id=port_id)
    _check(request, port.instance, operate=operate)
    return port


def _card(request: HttpRequest, instance: Instance, *, error: str = "", form: PortForm | None = None) -> HttpResponse:
    context = {
        "instance": instance,
        "ports": selectors.ports_for(instance=instance),
        "port_form": form or PortForm(),
        "share_form": ShareForm(),
        "error": error,
        "running": instance.status == Instance.Status.RUNNING,
        "can_operate": instance.can_operate,
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
    return _card(request, _instance(request, pk))


@login_required
@require_POST
def port_add(request: HttpRequest, pk) -> HttpResponse:
    instance = _instance(request, pk, operate=True)
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
    port = _port(request, pk, port_id, operate=True)
    services.port_remove(port=port)
    return _back(request, port.instance)


@login_required
@require_POST
def share_add(request: HttpRequest, pk, port_id: int) -> HttpResponse:
    port = _port(request, pk, port_id, operate=True)
    form = ShareForm(request.POST)
    if not form.is_valid():
        return _back(request, port.instance, error=" ".join(e for errs in form.errors.values() for e in errs))
    try:
        services.share_create(
            port=port, label=form.cleaned_data["label"], expires_at=form.expires_at(), actor=request.user
        )
    except PortRefused as exc:
        return _back(request, port.instance, error=exc.message)
    return _back(request, port.instance)


@login_required
@require_POST
def share_revoke(request: HttpRequest, pk, port_id: int, share_id: int) -> HttpResponse:
    port = _port(request, pk, port_id, operate=True)
    services.share_revoke(share=selectors.share_get_for(user=request_acting(request)[0], port=port, share_id=share_id))
    return _back(request, port.instance)


@login_required
@require_GET
def port_state(request: HttpRequest, pk, port_id: int) -> HttpResponse:
    """The port's state badge (answering or not), loaded by htmx after the card."""
    port = _port(request, pk, port_id)
    return render(request, "ports/_state.html", {"answering": selectors.port_answering(port=port)})
