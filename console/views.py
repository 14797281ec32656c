"""Pages that belong to no single app: the dashboard, liveness and readiness, development's mailbox."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache

from billing import access as billing_access
from billing.selectors import runway_get
from budgets.selectors import budget_status_for
from console import mail, proxy_handoff
from console.health import readiness_get
from instances.models import GpuModel
from instances.selectors import instance_list_for
from teams.roles import Permission, membership_can


def home(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return dashboard(request)
    gpus = GpuModel.objects.filter(is_active=True)
    return render(request, "console/landing.html", {"gpus": gpus})


DASHBOARD_TEAM_INSTANCES = 10  # the team's most recent instances listed on its dashboard


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    membership = getattr(request, "membership", None)
    if membership is not None:
        return render(request, "console/dashboard_team.html", _team_dashboard_context(request, membership))
    gpus = GpuModel.objects.filter(is_active=True)
    has_ssh_key = request.user.ssh_keys.exists()
    context = {
        "gpus": gpus,
        "has_ssh_key": has_ssh_key,
        # What the money does: how long it lasts at the current burn, and this month against the budget.
        "runway": runway_get(user=billing_access.principal(request)),
        "budget": budget_status_for(user=request.user),
    }
    return render(request, "console/dashboard.html", context)


def _team_dashboard_context(request: HttpRequest, membership) -> dict:
    """The team's figures, not the person's: its balance, runway and spend for those who may see its money
    (billing), its instances for those who may see its resources. A billing viewer gets no instances, a
    member without billing view no money: each part is left out, not shown empty."""
    account = billing_access.principal(request)
    sees_money = billing_access.allows(request, billing_access.VIEW)
    sees_instances = membership_can(membership, Permission.RESOURCES_VIEW)
    context: dict = {
        "team": membership.team,
        "sees_money": sees_money,
        "sees_instances": sees_instances,
        "can_launch": membership_can(membership, Permission.RESOURCES_LAUNCH),
        "can_manage_budget": membership_can(membership, Permission.BUDGETS_MANAGE),
    }
    if sees_money:
        context["runway"] = runway_get(user=account)
        context["budget"] = budget_status_for(user=account)
    if sees_instances:
        instances = instance_list_for(user=account).select_related("created_by")
        context["instances"] = list(instances[:DASHBOARD_TEAM_INSTANCES])
        context["instance_count"] = instances.count()
    return context


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


@login_required
@never_cache
def proxy_open(request: HttpRequest) -> HttpResponse:
    """Open a user server (``?next=/i/<id>/lab/``): on the user-content host through the one-time
    hand-off (``console.proxy_handoff``), or straight there when there is no such host."""
    next_path = request.GET.get("next", "")
    if not proxy_handoff.next_is_safe(next_path):
        raise Http404
    if not settings.CONSOLE_PROXY_HOST:
        return redirect(next_path)
    handoff = proxy_handoff.handoff_url(
        user_id=request.user.pk,
        session_key=request.session.session_key or "",
        next_path=next_path,
        scheme=request.scheme,
    )
    return redirect(handoff)


@never_cache
def admin_login(request: HttpRequest) -> HttpResponse:
    """The admin's log-in page is the console's own: the admin's form has none of its rate limits (nor
    anything added to it later), so it is never shown. Signed out: to the console's log-in, then back.
    Signed in as staff: on to the admin. Signed in as anyone else: refused, where the console's log-in
    (which sends a signed-in visitor on to ``next``) would only send them back here."""
    next_url = request.GET.get("next", "")
    if not url_has_allowed_host_and_scheme(
        next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        next_url = reverse("admin:index")
    if not request.user.is_authenticated:
        return redirect_to_login(next_url, settings.LOGIN_URL)
    if request.user.is_active and request.user.is_staff:
        return redirect(next_url)
    raise PermissionDenied
