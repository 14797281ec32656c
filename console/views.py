"""Pages that belong to no single app: the dashboard, health."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from instances.models import GpuModel


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


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness and database reachability, for load balancers and `make run`'s wait loop."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})
