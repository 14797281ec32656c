"""The security log's receivers: log-ins and log-outs (Django's signals) and what allauth's pages change.

The password and e-mail pages are allauth's, so their changes arrive as allauth's signals rather than
through a service of ours; each receiver only hands the request's client to a service. allauth sends
them inside the request that made the change, after the change is saved.
"""

from __future__ import annotations

from allauth.account import signals as allauth_signals
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
