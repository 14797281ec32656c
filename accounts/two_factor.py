"""Second factors (allauth's MFA): required of staff, optional for everyone else.

allauth.mfa gives each person an authenticator app (TOTP) with recovery codes, and passkeys (WebAuthn),
under ``/accounts/2fa/``; a password log-in of someone who has one stops at its second step. This module
adds what is the console's own:

- ``StaffSecondFactorMiddleware``: a staff member signed in without a second factor (a session that
  predates the rule, or a person just made staff) reaches no page but the enrolment, the admin and the
  staff pages included; ``SessionAuthentication`` refuses their session in the API the same way. API
  tokens are not sessions and are not asked: a token is its own credential, made by someone signed in.
- ``MFAAdapter``: a staff member cannot remove their last second factor (the app, or a passkey:
  ``remove_webauthn``); the app and the passkey are named after the console.
- ``authenticate``: the second step of a log-in, whose lockout (too many wrong codes) answers 429 as the
  log-in's does (``accounts.views.ConsoleLoginView``).

The security log's rows (enrolment, removal, codes used or refused) are written by the receivers in
``accounts.signals``.
"""

from __future__ import annotations

from allauth.core.ratelimit import respond_429
from allauth.mfa.adapter import DefaultMFAAdapter, get_adapter
from allauth.mfa.base import forms as mfa_forms
from allauth.mfa.base.views import AuthenticateView
from allauth.mfa.models import Authenticator
from allauth.mfa.totp.forms import ActivateTOTPForm as AllauthActivateTOTPForm
from allauth.mfa.webauthn.views import RemoveWebAuthnView
from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import Resolver404, resolve, reverse
from django.utils.translation import gettext_lazy as _
from django_htmx.http import HttpResponseClientRedirect
from drf_spectacular.authentication import SessionScheme
from rest_framework import authentication, exceptions

# What a second factor is: recovery codes only back one of these up, and never stand alone.
SECOND_FACTORS = (Authenticator.Type.TOTP, Authenticator.Type.WEBAUTHN)

# Where a staff member without a second factor may still go: the enrolment itself (every ``mfa_*`` page),
# confirming their password for it, verifying an address (allauth enrols only verified accounts), leaving,
# choosing a language, and what a load balancer or Prometheus asks.
ALLOWED_WITHOUT_SECOND_FACTOR = frozenset(
    {
        "account_logout",
        "account_reauthenticate",
        "account_email",
        "account_confirm_email",
        "account_email_verification_sent",
        "set_language",
        "javascript-catalog",
        "healthz",
        "readyz",
        "console_metrics",
    }
)


def second_factor_enabled(user) -> bool:
    """Whether ``user`` signs in with a second factor (an authenticator app or a passkey)."""
    if not getattr(user, "pk", None):
        return False
    return Authenticator.objects.filter(user_id=user.pk, type__in=SECOND_FACTORS).exists()


def second_factor_required(user) -> bool:
    """Whether ``user`` is signed in, must have a second factor (staff) and has none yet."""
    return bool(user.is_authenticated and user.is_staff and not second_factor_enabled(user))


class StaffSecondFactorMiddleware:
    """Sends a signed-in staff member without a second factor to enrol one, from any page.

    After ``AuthenticationMiddleware``. The API (``/api/``) is left to its authentication classes: a
    session there is refused by ``SessionAuthentication`` below, and a token is never asked.
    """

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # In __call__, not process_view: under ASGI each process_view hook is one more hop between
        # threads for every request, and this check concerns only staff without a second factor.
        if request.path.startswith("/api/v1/") or not second_factor_required(request.user):
            return self.get_response(request)
        try:
            name = resolve(request.path_info).url_name
        except Resolver404:
            name = None
        if name and (name.startswith("mfa_") or name in ALLOWED_WITHOUT_SECOND_FACTOR):
            return self.get_response(request)
        if getattr(request, "htmx", False):  # a partial: the whole page goes
            return HttpResponseClientRedirect(reverse("mfa_index"))
        return redirect("mfa_index")


class SecondFactorRequired(exceptions.PermissionDenied):
    """403 ``second_factor_required``: a staff session without a second factor, in the API."""

    default_detail = _("Staff accounts need a second factor: add an authenticator app or a passkey first.")
    default_code = "second_factor_required"


class SessionAuthentication(authentication.SessionAuthentication):
    """DRF's session authentication, refusing the session of a staff member without a second factor."""

    def authenticate(self, request):
        result = super().authenticate(request)
        if result is not None and second_factor_required(result[0]):
            raise SecondFactorRequired()
        return result


class SessionAuthenticationScheme(SessionScheme):
    """The schema documents the session as drf-spectacular documents DRF's own (``cookieAuth``)."""

    target_class = "accounts.two_factor.SessionAuthentication"


class MFAAdapter(DefaultMFAAdapter):
    """allauth's MFA adapter, except that staff keep at least one second factor."""

    error_messages = {
        **DefaultMFAAdapter.error_messages,
        "cannot_delete_authenticator": _(
            "Staff accounts need a second factor: add another one before you remove this one."
        ),
    }

    def get_totp_issuer(self) -> str:
        """The name an authenticator app lists the account under: the console's, not its host's."""
        return settings.MFA_TOTP_ISSUER or settings.CONSOLE_SITE_NAME

    def get_public_key_credential_rp_entity(self) -> dict[str, str]:
        """The passkey's relying party: this host (without its port), named as the console is."""
        return {**super().get_public_key_credential_rp_entity(), "name": settings.CONSOLE_SITE_NAME}

    def can_delete_authenticator(self, authenticator: Authenticator) -> bool:
        user = authenticator.user
        if not user.is_staff or authenticator.type not in SECOND_FACTORS:
            return True
        others = Authenticator.objects.filter(user_id=user.pk, type__in=SECOND_FACTORS).exclude(pk=authenticator.pk)
        return others.exists()


def _code_input(form, *, autofocus: bool) -> None:
    """A phone shows its number pad for the code (recovery codes are digits too)."""
    form.fields["code"].widget.attrs.update({"inputmode": "numeric", **({"autofocus": True} if autofocus else {})})


class AuthenticateForm(mfa_forms.AuthenticateForm):
    """The log-in's second step (settings.MFA_FORMS): the code field focused, with the number pad."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        _code_input(self, autofocus=True)


class ReauthenticateForm(mfa_forms.ReauthenticateForm):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        _code_input(self, autofocus=True)


class ActivateTOTPForm(AllauthActivateTOTPForm):
    # Not focused: on a phone that would scroll past the QR code and the key the page starts with.
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        _code_input(self, autofocus=False)


class ConsoleAuthenticateView(AuthenticateView):
    """allauth's second step of a log-in, except that a lockout answers 429 rather than a form error."""

    def form_invalid(self, form) -> HttpResponse:
        if form.has_error("code", code="too_many_login_attempts"):
            return respond_429(self.request)
        return super().form_invalid(form)


authenticate = ConsoleAuthenticateView.as_view()


class ConsoleRemoveWebAuthnView(RemoveWebAuthnView):
    """allauth's removal of a passkey, except that it asks the adapter first (allauth asks only for the
    authenticator app): staff keep their last second factor."""

    def get_context_data(self, **kwargs) -> dict:
        context = super().get_context_data(**kwargs)
        adapter = get_adapter()
        if not adapter.can_delete_authenticator(self.object):
            context["refusal"] = adapter.error_messages["cannot_delete_authenticator"]
        return context

    def form_valid(self, form) -> HttpResponse:
        adapter = get_adapter()
        if not adapter.can_delete_authenticator(self.get_object()):
            messages.error(self.request, adapter.error_messages["cannot_delete_authenticator"])
            return redirect("mfa_list_webauthn")
        return super().form_valid(form)


remove_webauthn = ConsoleRemoveWebAuthnView.as_view()
