"""Account pages: profile, SSH keys, API tokens, the security log, and the log-in view's lockout answer."""

from __future__ import annotations

from allauth.account.views import LoginView
from allauth.core.ratelimit import respond_429
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.forms.forms import NON_FIELD_ERRORS
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from accounts import selectors, services
from accounts.client import request_client
from accounts.forms import APITokenForm, ProfileForm, SSHKeyForm, form_add_service_error
from accounts.language import language_apply
from accounts.throttles import account_rate_per_min
from accounts.tokens import token_team_choices
from accounts.two_factor import second_factor_enabled


class ConsoleLoginView(LoginView):
    """allauth's log-in, except that a locked-out address gets the 429 page rather than a form error.

    allauth counts failed attempts per address (ACCOUNT_RATE_LIMITS["login_failed"]) and, past the
    limit, refuses even the right password with a form error. Answering 429 says plainly what
    happened, with the same page as every other limit.
    """

    def form_invalid(self, form):
        if form.has_error(NON_FIELD_ERRORS, code="too_many_login_attempts"):
            return respond_429(self.request)
        return super().form_invalid(form)


login = ConsoleLoginView.as_view()


@login_required
@require_http_methods(["GET", "POST"])
def profile(request: HttpRequest) -> HttpResponse:
    user = request.user
    form = ProfileForm(request.POST or None, initial={"display_name": user.display_name, "language": user.language})
    if request.method == "POST" and form.is_valid():
        try:
            services.user_profile_update(
                user=user,
                display_name=form.cleaned_data["display_name"],
                language=form.cleaned_data["language"] or None,
            )
        except ValidationError as error:
            form_add_service_error(form, error)
        else:
            language_apply(request, user.language)
            with translation.override(user.language):
                messages.success(request, _("Your profile is saved."))
            return redirect("account_profile")
    context = {
        "form": form,
        "primary_email": user.email,
        "ssh_key_count": selectors.ssh_key_list_for(user=user).count(),
        "token_count": selectors.api_token_list_for(user=user).filter(revoked_at__isnull=True).count(),
        "second_factor": second_factor_enabled(user),
    }
    return render(request, "accounts/profile.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def ssh_keys(request: HttpRequest) -> HttpResponse:
    form = SSHKeyForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            key = services.ssh_key_add(
                user=request.user,
                name=form.cleaned_data["name"],
                public_key=form.cleaned_data["public_key"],
                **request_client(request),
            )
        except ValidationError as error:
            form_add_service_error(form, error)
            if form.has_error("public_key", code="private_key"):
                # Do not send a private key back to the browser inside the page.
                form.data = form.data.copy()
                form.data["public_key"] = ""
        else:
            messages.success(request, _("SSH key “%(name)s” added.") % {"name": key.name})
            return redirect("account_ssh_keys")
    keys = selectors.ssh_key_list_for(user=request.user)
    status = 400 if form.is_bound else 200
    return render(request, "accounts/ssh_keys.html", {"form": form, "keys": keys}, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def ssh_key_delete(request: HttpRequest, key_id: int) -> HttpResponse:
    key = get_object_or_404(selectors.ssh_key_list_for(user=request.user), pk=key_id)
    if request.method == "POST":
        services.ssh_key_delete(user=request.user, key_id=key.pk, **request_client(request))
        messages.success(request, _("SSH key “%(name)s” deleted.") % {"name": key.name})
        return redirect("account_ssh_keys")
    return render(request, "accounts/ssh_key_delete.html", {"key": key})


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def api_tokens(request: HttpRequest) -> HttpResponse:
    teams = token_team_choices(user=request.user)
    acting = getattr(request, "membership", None)
    form_options = {
        "teams": teams,
        "initial_team": getattr(acting, "team_id", None),
        "account_rate": account_rate_per_min(request.user),
    }
    form = APITokenForm(request.POST or None, **form_options)
    created = raw_token = None
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                created, raw_token = services.api_token_create(
                    user=request.user,
                    name=form.cleaned_data["name"],
                    expires_at=form.expires_at(),
                    scope=form.cleaned_data["scope"],
                    team_id=form.cleaned_data["team"],
                    rate_per_min=form.cleaned_data["rate_per_min"],
                    **request_client(request),
                )
            except ValidationError as error:
                form_add_service_error(form, error)
        if created is None:
            status = 400
        else:
            # The raw token is rendered into this one response and kept nowhere: no redirect, no session.
            form = APITokenForm(**form_options)
            status = 201
    tokens = selectors.api_token_list_for(user=request.user)
    context = {
        "form": form,
        "tokens": tokens,
        "created": created,
        "raw_token": raw_token,
        "now": timezone.now(),
        "account_rate": form_options["account_rate"],
    }
    return render(request, "accounts/api_tokens.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def api_token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    token = get_object_or_404(selectors.api_token_list_for(user=request.user), pk=token_id)
    if request.method == "POST":
        if services.api_token_revoke(token=token, **request_client(request)):
            messages.success(request, _("Token “%(name)s” revoked: it no longer works.") % {"name": token.name})
        else:
            messages.info(request, _("Token “%(name)s” was already revoked.") % {"name": token.name})
        return redirect("account_api_tokens")
    return render(request, "accounts/api_token_revoke.html", {"token": token})


SECURITY_LOG_PAGE_SIZE = 50


@login_required
@require_http_methods(["GET"])
def security_log(request: HttpRequest) -> HttpResponse:
    """The user's own security log, newest first: what to look at after an unexpected e-mail."""
    page = Paginator(selectors.security_event_list_for(user=request.user), SECURITY_LOG_PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    return render(request, "accounts/security_log.html", {"page": page})
