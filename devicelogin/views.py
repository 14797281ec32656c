"""The page where a logged-in user confirms (or refuses) a command line's device code."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from accounts.client import request_client
from devicelogin import services
from devicelogin.forms import UserCodeForm


@login_required
@require_http_methods(["GET", "POST"])
def device_login(request: HttpRequest) -> HttpResponse:
    data = request.POST if request.method == "POST" else (request.GET if "code" in request.GET else None)
    form = UserCodeForm(data)
    authorization = None
    if form.is_valid():
        authorization = services.device_login_pending(user_code=form.cleaned_data["code"])
        if authorization is None:
            form.add_error(
                "code", _("No log-in waits for this code: it may have expired. Start again in the terminal.")
            )
        elif request.method == "POST" and request.POST.get("decision") in {"approve", "deny"}:
            approve = request.POST["decision"] == "approve"
            decided = services.device_login_decide(
                authorization=authorization, user=request.user, approve=approve, **request_client(request)
            )
            if decided:
                if approve:
                    messages.success(
                        request,
                        _("%(client)s is logged in. You can close this page.") % {"client": authorization.client_name},
                    )
                else:
                    messages.info(request, _("The log-in was refused."))
                return redirect("account_api_tokens")
            form.add_error("code", _("This code was already used or has expired."))
            authorization = None
    status = 400 if form.errors else 200
    return render(request, "devicelogin/confirm.html", {"form": form, "authorization": authorization}, status=status)
