"""Pages that belong to no single app: the dashboard, sections still to come, health."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.translation import gettext_lazy as _

from instances.models import GpuModel

SECTIONS = {
    "instances": {
        "title": _("Instances"),
        "blurb": _("Launch GPU instances with JupyterLab, VS Code and SSH, billed per second."),
    },
    "apps": {
        "title": _("Apps"),
        "blurb": _("Deploy a chat or image-generation WebUI on the right GPU in one click."),
    },
    "storage": {
        "title": _("Storage"),
        "blurb": _("Shared volumes, public models and datasets mounted into every instance."),
    },
    "billing": {
        "title": _("Billing"),
        "blurb": _("Your balance, trial credit, top-ups and itemised per-second statements."),
    },
    "quota": {
        "title": _("GPU quota"),
        "blurb": _("Ask for more GPUs of a model; staff review requests within a working day."),
    },
}


def home(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return dashboard(request)
    gpus = GpuModel.objects.filter(is_active=True)
    return render(request, "console/landing.html", {"gpus": gpus})


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    gpus = GpuModel.objects.filter(is_active=True)
    has_ssh_key = request.user.ssh_keys.exists()
    return render(request, "console/dashboard.html", {"gpus": gpus, "has_ssh_key": has_ssh_key})


@login_required
def coming_soon(request: HttpRequest, section: str) -> HttpResponse:
    return render(request, "console/coming_soon.html", {"section": SECTIONS[section], "section_key": section})


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness and database reachability, for load balancers and `make run`'s wait loop."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})
