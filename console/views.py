"""Pages that belong to no single app: the dashboard, health, and development's local mailbox."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from console import mail
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


# --- Development only: the local mailbox (console/mail.py) ------------------------------------------
# No log-in: the newcomer reading the verification e-mail has no session yet. Every message is
# readable by whoever reaches the page, which is why it answers in development only.


def dev_mailbox(request: HttpRequest) -> HttpResponse:
    if not mail.dev_pages_enabled():
        raise Http404
    return render(request, "console/dev_mailbox.html", {"mails": mail.mailbox_list(), "active": mail.mailbox_active()})


def dev_mail(request: HttpRequest, key: str) -> HttpResponse:
    if not mail.dev_pages_enabled():
        raise Http404
    message = mail.mailbox_get(key=key)
    if message is None:
        raise Http404
    return render(request, "console/dev_mail.html", {"mail": message})
