"""The security log's receivers: log-ins and log-outs (Django's signals) and what allauth's pages change.

The password, e-mail and second-factor pages are allauth's, so their changes arrive as allauth's signals rather than
through a service of ours; each receiver only hands the request's client to a service. allauth sends
them inside the request that made the change, after the change is saved.
"""

from __future__ import annotations

from allauth.account import signals as allauth_signals
from allauth.mfa import signals as mfa_signals
from allauth.mfa.models import Authenticator
from django.contrib.auth import get_user_model
from django.contrib.auth import signals as auth_signals
from django.dispatch import receiver

from accounts import services
from accounts.client import request_client
from accounts.models import SecurityEvent

Action = SecurityEvent.Action


def _record(action: Action, *, user, request, details: dict | None = None) -> None:
    if user is None or not getattr(user, "pk", None):  # an anonymous log-out: nobody's log
        return
    services.security_event_record(user=user, action=action, details=details, **request_client(request))


@receiver(auth_signals.user_logged_in, dispatch_uid="accounts.security.logged_in")
def on_logged_in(sender, request, user, **kwargs) -> None:
    _record(Action.LOGIN, user=user, request=request)


@receiver(auth_signals.user_logged_out, dispatch_uid="accounts.security.logged_out")
def on_logged_out(sender, request, user, **kwargs) -> None:
    _record(Action.LOGOUT, user=user, request=request)


@receiver(auth_signals.user_login_failed, dispatch_uid="accounts.security.login_failed")
def on_login_failed(sender, credentials, request=None, **kwargs) -> None:
    # allauth's form sends "email"; the admin's and Django's own send the USERNAME_FIELD (also the e-mail).
    email = credentials.get("email") or credentials.get(get_user_model().USERNAME_FIELD) or ""
    if isinstance(email, str) and email:
        services.security_login_failed_record(email=email, **request_client(request))


@receiver(allauth_signals.password_changed, dispatch_uid="accounts.security.password_changed")
@receiver(allauth_signals.password_set, dispatch_uid="accounts.security.password_set")
def on_password_changed(sender, request, user, **kwargs) -> None:
    _record(Action.PASSWORD_CHANGED, user=user, request=request)


@receiver(allauth_signals.password_reset, dispatch_uid="accounts.security.password_reset")
def on_password_reset(sender, request, user, **kwargs) -> None:
    _record(Action.PASSWORD_RESET, user=user, request=request)


@receiver(allauth_signals.email_changed, dispatch_uid="accounts.security.email_changed")
def on_email_changed(sender, request, user, from_email_address=None, to_email_address=None, **kwargs) -> None:
    details = {"to": to_email_address.email if to_email_address is not None else ""}
    if from_email_address is not None:
        details["from"] = from_email_address.email
    _record(Action.EMAIL_CHANGED, user=user, request=request, details=details)


# --- Second factors (allauth.mfa) -------------------------------------------------------------------


def _second_factor(authenticator: Authenticator) -> dict:
    """What tells one second factor from another in the log: its method, and a passkey's name."""
    details = {"method": authenticator.type}
    if authenticator.type == Authenticator.Type.WEBAUTHN:
        details["name"] = authenticator.wrap().name
    return details


@receiver(mfa_signals.authenticator_added, dispatch_uid="accounts.security.second_factor_added")
def on_second_factor_added(sender, request, user, authenticator, **kwargs) -> None:
    _record(Action.SECOND_FACTOR_ADDED, user=user, request=request, details=_second_factor(authenticator))


@receiver(mfa_signals.authenticator_removed, dispatch_uid="accounts.security.second_factor_removed")
def on_second_factor_removed(sender, request, user, authenticator, **kwargs) -> None:
    _record(Action.SECOND_FACTOR_REMOVED, user=user, request=request, details=_second_factor(authenticator))


@receiver(mfa_signals.authenticator_reset, dispatch_uid="accounts.security.recovery_codes_generated")
def on_recovery_codes_generated(sender, request, user, authenticator, **kwargs) -> None:
    _record(Action.RECOVERY_CODES_GENERATED, user=user, request=request)


@receiver(mfa_signals.authenticator_used, dispatch_uid="accounts.security.second_factor_used")
def on_second_factor_used(
    sender, request, user, authenticator, reauthenticated=False, passwordless=False, **kwargs
) -> None:
    details = _second_factor(authenticator)
    if reauthenticated:
        details["reauthenticated"] = True  # confirming a change, not a log-in
    if passwordless:
        details["passwordless"] = True  # a passkey's own log-in, with no password before it
    if authenticator.type == Authenticator.Type.RECOVERY_CODES:
        # Read again: allauth marked the code used on a row it locked, not on this instance.
        codes = Authenticator.objects.filter(pk=authenticator.pk).first()
        details["left"] = len(codes.wrap().get_unused_codes()) if codes is not None else 0
        _record(Action.RECOVERY_CODE_USED, user=user, request=request, details=details)
    else:
        _record(Action.SECOND_FACTOR_USED, user=user, request=request, details=details)


@receiver(mfa_signals.authentication_failed, dispatch_uid="accounts.security.second_factor_failed")
def on_second_factor_failed(sender, request, user, authenticator, reauthentication=False, **kwargs) -> None:
    details = {"reauthenticated": True} if reauthentication else {}
    _record(Action.SECOND_FACTOR_FAILED, user=user, request=request, details=details)
