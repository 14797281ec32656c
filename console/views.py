"""Pages that belong to no single app: the dashboard, liveness and readiness."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache

from console.health import readiness_get
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


@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the process answers. It touches nothing else (see console.health)."""
    return JsonResponse({"status": "ok"})


@never_cache
def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness: 200 when the database, cache and broker answer, else 503 naming what failed."""
    checks = readiness_get()
    failed = [name for name, result in checks.items() if result != "ok"]
    if failed:
        return JsonResponse({"status": "unavailable", "failed": failed, "checks": checks}, status=503)
    return JsonResponse({"status": "ok", "checks": checks})
