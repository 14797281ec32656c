"""The inbox and the preferences page (with the user's webhook endpoints). Thin: services write."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from notifications import selectors, services
from notifications.forms import WebhookEndpointForm
from notifications.models import Kind
from notifications.throttles import WebhookTestThrottle

PAGE_SIZE = 20


@login_required
def inbox(request: HttpRequest) -> HttpResponse:
    unread_only = request.GET.get("unread") == "1"
    rows = selectors.notification_list_for(user=request.user, unread=unread_only)
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "notifications/inbox.html", {"page": page, "unread_only": unread_only})


def _back(request: HttpRequest, default: str = "notifications"):
    target = request.POST.get("next") or ""
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return redirect(target)
    return redirect(default)


@login_required
@require_POST
def mark_read(request: HttpRequest) -> HttpResponse:
    """Mark the ticked lines read, or all of them (``all=1``). Ids of others' lines change nothing."""
    if request.POST.get("all") == "1":
        services.notifications_mark_read(user=request.user)
    else:
        ids = [int(i) for i in request.POST.getlist("id") if i.isdigit()]
        services.notifications_mark_read(user=request.user, ids=ids)
    return _back(request)


@login_required
def open_notification(request: HttpRequest, pk: int) -> HttpResponse:
    """Follow a line's link, marking it read (another user's line: 404)."""
    row = get_object_or_404(selectors.notification_list_for(user=request.user), pk=pk)
    services.notifications_mark_read(user=request.user, ids=[row.pk])
    if row.link and url_has_allowed_host_and_scheme(row.link, allowed_hosts={request.get_host()}):
        return redirect(row.link)
    return redirect("notifications")


def _preferences_page(request: HttpRequest, *, form=None, new_endpoint=None, status: int = 200) -> HttpResponse:
    context = {
        "table": selectors.preference_table_for(user=request.user),
        "endpoints": selectors.webhook_endpoint_list_for(user=request.user),
        "deliveries": selectors.webhook_delivery_list_for(user=request.user)[:10],
        "form": form or WebhookEndpointForm(),
        "new_endpoint": new_endpoint,
    }
    return render(request, "notifications/preferences.html", context, status=status)


@login_required
def preferences(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        choices = {
            kind.value: {
                "email": request.POST.get(f"email_{kind.value}") == "on",
                "webhook": request.POST.get(f"webhook_{kind.value}") == "on",
            }
            for kind in Kind
        }
        services.preferences_set(user=request.user, choices=choices)
        messages.success(request, _("Your notification preferences are saved."))
        return redirect("notification_preferences")
    return _preferences_page(request)


@login_required
@require_POST
def webhook_create(request: HttpRequest) -> HttpResponse:
    """Add an endpoint and show its secret, once, on the page this answers with."""
    form = WebhookEndpointForm(request.POST)
    if form.is_valid():
        try:
            endpoint = services.webhook_endpoint_create(user=request.user, url=form.cleaned_data["url"])
        except ValidationError as error:
            form.add_error("url", error)
        except services.EndpointLimitReached as error:
            form.add_error("url", str(error))
        else:
            return _preferences_page(request, new_endpoint=endpoint)
    return _preferences_page(request, form=form, status=400)


def _endpoint(request: HttpRequest, pk):
    return get_object_or_404(selectors.webhook_endpoint_list_for(user=request.user), pk=pk)


@login_required
@require_POST
def webhook_delete(request: HttpRequest, pk) -> HttpResponse:
    services.webhook_endpoint_delete(endpoint=_endpoint(request, pk))
    messages.success(request, _("Webhook endpoint removed."))
    return redirect("notification_preferences")


@login_required
@require_POST
def webhook_toggle(request: HttpRequest, pk) -> HttpResponse:
    endpoint = _endpoint(request, pk)
    services.webhook_endpoint_update(endpoint=endpoint, active=not endpoint.active)
    return redirect("notification_preferences")


@login_required
@require_POST
def webhook_test(request: HttpRequest, pk) -> HttpResponse:
    endpoint = _endpoint(request, pk)
    if not WebhookTestThrottle().allow_request(request, None):
        messages.error(request, _("Too many test events; try again in a minute."))
        return redirect("notification_preferences")
    services.webhook_test_send(endpoint=endpoint)
    messages.info(request, _("Test event sent. Its delivery shows below."))
    return redirect("notification_preferences")
