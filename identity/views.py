"""Identity's pages: log in (or sign up) by mobile number, the account's number and real name, the texts inbox.

Thin: each view reads a form, calls one service and renders what it says. Refusals become form errors
(400), limits 429 and a provider that does not answer 503, both with Retry-After.
"""

from __future__ import annotations

import secrets

from allauth.account import app_settings as allauth_settings
from allauth.account.signals import user_signed_up
from allauth.account.utils import perform_login
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from identity import selectors, services
from identity.errors import IdentityError, SmsUnavailable, TooManyCodes
from identity.forms import IndividualForm, OrganisationForm, PhoneCodeForm, PhoneForm, PhoneLoginCodeForm
from identity.models import PhoneCode
from identity.sms import dev as dev_texts
from identity.sms.dev import inbox_active

DEVICE_MAX_AGE = 365 * 24 * 3600


def _device(request: HttpRequest) -> str:
    """The browser's device id (a random cookie), made on first use; limits count texts per device."""
    found = request.COOKIES.get(settings.IDENTITY_DEVICE_COOKIE_NAME, "")
    if len(found) == 32 and found.isalnum():
        return found
    if not hasattr(request, "_identity_device"):
        request._identity_device = secrets.token_hex(16)
    return request._identity_device


def _with_device(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    new = getattr(request, "_identity_device", None)
    if new:
        response.set_cookie(
            settings.IDENTITY_DEVICE_COOKIE_NAME,
            new,
            max_age=DEVICE_MAX_AGE,
            httponly=True,
            samesite="Lax",
            secure=settings.IDENTITY_DEVICE_COOKIE_NAME.startswith("__Host-") or request.is_secure(),
        )
    return response


def _refusal_status(exc: IdentityError) -> int:
    if isinstance(exc, TooManyCodes):
        return 429
    if isinstance(exc, SmsUnavailable):
        return 503
    return 400


def _render_refused(request, template: str, context: dict, form, exc: IdentityError) -> HttpResponse:
    field = exc.field if exc.field in form.fields and not form.fields[exc.field].widget.is_hidden else None
    form.add_error(field, exc.message)
    response = render(request, template, context, status=_refusal_status(exc))
    retry_after = getattr(exc, "retry_after", None)
    if retry_after:
        response["Retry-After"] = str(retry_after)
    return response


def _next_url(request: HttpRequest) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return target
    return reverse(settings.LOGIN_REDIRECT_URL)


# --- Log in or sign up by mobile number -------------------------------------------------------------------


def phone_login(request: HttpRequest) -> HttpResponse:
    """One page for both: a number, then its code; a number with no account gets one (so the page tells
    no one which numbers have accounts)."""
    if not settings.IDENTITY_PHONE_LOGIN:
        raise Http404
    if request.user.is_authenticated:
        return redirect(settings.LOGIN_REDIRECT_URL)
    context = {"next": _next_url(request), "inbox": inbox_active()}
    template = "identity/phone_login.html"
    if request.method != "POST":
        return _with_device(request, render(request, template, {**context, "form": PhoneForm()}))
    if "code" not in request.POST:
        form = PhoneForm(request.POST)
        context["form"] = form
        if not form.is_valid():
            return render(request, template, context, status=400)
        try:
            row = services.phone_code_send(
                number=form.cleaned_data["number"],
                purpose=PhoneCode.Purpose.LOGIN,
                ip=request.META.get("REMOTE_ADDR"),
                device=_device(request),
            )
        except IdentityError as exc:
            return _with_device(request, _render_refused(request, template, context, form, exc))
        code_form = PhoneLoginCodeForm(initial={"number": row.number})
        return _with_device(request, render(request, template, {**context, "form": code_form, "sent_to": row.number}))
    form = PhoneLoginCodeForm(request.POST)
    context.update(form=form, sent_to=request.POST.get("number", ""))
    if not form.is_valid():
        return render(request, template, context, status=400)
    try:
        user, created = services.phone_login(number=form.cleaned_data["number"], code=form.cleaned_data["code"])
    except IdentityError as exc:
        return _render_refused(request, template, context, form, exc)
    if created:
        user_signed_up.send(sender=user.__class__, request=request, user=user)
    return perform_login(
        request,
        user,
        email_verification=allauth_settings.EmailVerificationMethod.NONE,  # the number is what was verified
        redirect_url=context["next"],
        signup=created,
    )


# --- The account's number and real name ------------------------------------------------------------------


def _settings_context(request: HttpRequest, **forms) -> dict:
    user = request.user
    return {
        "phone": selectors.phone_number_for(user=user),
        "real_name": selectors.real_name_for(user=user),
        "has_email": services.has_email(user),
        "phone_form": forms.get("phone_form") or PhoneForm(),
        "code_form": forms.get("code_form"),
        "individual_form": forms.get("individual_form") or IndividualForm(),
        "organisation_form": forms.get("organisation_form") or OrganisationForm(),
        "required": settings.IDENTITY_REAL_NAME_REQUIRED,
        "trial_requires": settings.IDENTITY_TRIAL_REQUIRES,
        "inbox": inbox_active(),
        "sms": bool(settings.IDENTITY_PHONE_LOGIN),
        "individuals": bool(settings.IDENTITY_REAL_NAME_PROVIDER.get("BACKEND")),
    }


@login_required
def identity_settings(request: HttpRequest) -> HttpResponse:
    return render(request, "identity/settings.html", _settings_context(request))


@login_required
@require_POST
def phone_change(request: HttpRequest) -> HttpResponse:
    """Two steps on one address: ``number`` sends a code; ``number`` and ``code`` verify it."""
    if not settings.IDENTITY_PHONE_LOGIN:
        raise Http404
    template = "identity/settings.html"
    if "code" not in request.POST:
        form = PhoneForm(request.POST)
        context = _settings_context(request, phone_form=form)
        if not form.is_valid():
            return render(request, template, context, status=400)
        try:
            row = services.phone_code_send(
                number=form.cleaned_data["number"],
                purpose=PhoneCode.Purpose.ADD,
                ip=request.META.get("REMOTE_ADDR"),
                device=_device(request),
                user=request.user,
            )
        except IdentityError as exc:
            return _with_device(request, _render_refused(request, template, context, form, exc))
        code_form = PhoneCodeForm(initial={"number": row.number})
        context = _settings_context(request, code_form=code_form)
        context["sent_to"] = row.number
        return _with_device(request, render(request, template, context))
    form = PhoneCodeForm(request.POST)
    context = _settings_context(request, code_form=form)
    context["sent_to"] = request.POST.get("number", "")
    if not form.is_valid():
        return render(request, template, context, status=400)
    try:
        services.phone_set(user=request.user, number=form.cleaned_data["number"], code=form.cleaned_data["code"])
    except IdentityError as exc:
        return _render_refused(request, template, context, form, exc)
    messages.success(request, _("Your mobile number is verified."))
    return redirect("identity_settings")


@login_required
@require_POST
def real_name_individual(request: HttpRequest) -> HttpResponse:
    form = IndividualForm(request.POST)
    context = _settings_context(request, individual_form=form)
    if not form.is_valid():
        return render(request, "identity/settings.html", context, status=400)
    try:
        services.real_name_verify_individual(
            user=request.user, name=form.cleaned_data["name"], id_number=form.cleaned_data["id_number"]
        )
    except IdentityError as exc:
        context = _settings_context(request, individual_form=form)  # a refusal may have added a row
        status = 503 if exc.code == "real_name_unavailable" else 400
        form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        response = render(request, "identity/settings.html", context, status=status)
        if status == 503:
            response["Retry-After"] = str(exc.retry_after)
        return response
    messages.success(request, _("Your real name is verified."))
    return redirect("identity_settings")


@login_required
@require_POST
def real_name_organisation(request: HttpRequest) -> HttpResponse:
    form = OrganisationForm(request.POST, request.FILES)
    context = _settings_context(request, organisation_form=form)
    if not form.is_valid():
        return render(request, "identity/settings.html", context, status=400)
    try:
        services.real_name_submit_organisation(
            user=request.user,
            company_name=form.cleaned_data["company_name"],
            credit_code=form.cleaned_data["credit_code"],
            document=form.cleaned_data["document"],
        )
    except IdentityError as exc:
        form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        return render(request, "identity/settings.html", context, status=400)
    messages.success(request, _("Thank you: staff review the licence, usually within a working day."))
    return redirect("identity_settings")


# --- Development: the texts inbox (identity/sms/dev.py) ----------------------------------------------------


def dev_pages_enabled() -> bool:
    """As the development mailbox: DEBUG or ``CONSOLE_ENV=development``, never in production."""
    return not getattr(settings, "PRODUCTION", False) and (settings.DEBUG or settings.CONSOLE_ENV == "development")


def dev_texts_inbox(request: HttpRequest) -> HttpResponse:
    """No log-in: the newcomer reading their sign-up code has no session yet (development only)."""
    if not dev_pages_enabled():
        raise Http404
    return render(request, "identity/dev_texts.html", {"texts": dev_texts.texts_list(), "active": inbox_active()})
