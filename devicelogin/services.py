"""Start, confirm and redeem a device log-in. Every move is a compare-and-set on ``status``."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from accounts.models import APIToken, SecurityEvent
from accounts.services import api_token_create, security_event_record
from devicelogin.models import DeviceAuthorization

LIFETIME = timedelta(minutes=10)
POLL_INTERVAL_S = 2
# No 0/O, 1/I/L, 5/S, 2/Z: a code read aloud or from a small screen is typed right the first time.
_ALPHABET = "ABCDEFGHJKMNPQRTUVWXY346789"


class DeviceLoginRefused(Exception):
    """``code``: not_found, authorization_pending, access_denied, expired_token or limit_reached (the
    user holds the most API tokens allowed)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def _digest(device_code: str) -> str:
    return hashlib.sha256(device_code.encode()).hexdigest()


def user_code_normalise(raw: str) -> str:
    """``abcd efgh`` / ``ABCD-EFGH`` → ``ABCD-EFGH``."""
    letters = "".join(ch for ch in raw.upper() if ch.isalnum())
    return f"{letters[:4]}-{letters[4:8]}" if len(letters) == 8 else letters


def device_login_start(*, client_name: str, scope: str = APIToken.Scope.FULL) -> tuple[DeviceAuthorization, str]:
    """A new pending log-in and its device code (returned once, stored as a digest).

    ``scope`` is the access of the token it will make: a read-only one for ``gpuctl login --read-only``.
    """
    if scope not in APIToken.Scope.values:  # the API's serializer refuses it first, with a 400
        raise ValueError(f"Unknown token scope {scope!r}.")
    device_code = secrets.token_urlsafe(32)
    user_code = "".join(secrets.choice(_ALPHABET) for _ in range(8))
    authorization = DeviceAuthorization.objects.create(
        device_code_digest=_digest(device_code),
        user_code=f"{user_code[:4]}-{user_code[4:]}",
        client_name=" ".join(client_name.split())[:64] or "gpuctl",
        expires_at=timezone.now() + LIFETIME,
        scope=scope,
    )
    return authorization, device_code


def device_login_pending(*, user_code: str) -> DeviceAuthorization | None:
    """The pending, unexpired log-in with this code, or None."""
    return DeviceAuthorization.objects.filter(
        user_code=user_code_normalise(user_code),
        status=DeviceAuthorization.Status.PENDING,
        expires_at__gt=timezone.now(),
    ).first()


def device_login_decide(
    *, authorization: DeviceAuthorization, user, approve: bool, ip: str | None = None, user_agent: str = ""
) -> bool:
    """Confirm (or refuse) for ``user``; False when it was no longer pending (decided, or expired).

    An approval goes into the user's security log (with the browser's address), in the same transaction.
    """
    status = DeviceAuthorization.Status.APPROVED if approve else DeviceAuthorization.Status.DENIED
    with transaction.atomic():
        decided = DeviceAuthorization.objects.filter(
            pk=authorization.pk, status=DeviceAuthorization.Status.PENDING, expires_at__gt=timezone.now()
        ).update(status=status, user=user)
        if decided and approve:
            security_event_record(
                user=user,
                action=SecurityEvent.Action.DEVICE_LOGIN_APPROVED,
                ip=ip,
                user_agent=user_agent,
                details={"client": authorization.client_name, "scope": authorization.scope},
            )
    return bool(decided)


def device_login_redeem(*, device_code: str, ip: str | None = None, user_agent: str = "") -> str:
    """The new API token once the user confirmed; otherwise ``DeviceLoginRefused`` saying why.

    The approved → redeemed move and the token are one transaction, so two polls racing get one
    token between them and the other a ``not_found`` (the code is spent).
    """
    with transaction.atomic():
        authorization = (
            DeviceAuthorization.objects.select_for_update().filter(device_code_digest=_digest(device_code)).first()
        )
        if authorization is None or authorization.status == DeviceAuthorization.Status.REDEEMED:
            raise DeviceLoginRefused("not_found", _("No such device code (or it was used already)."))
        if authorization.status == DeviceAuthorization.Status.DENIED:
            raise DeviceLoginRefused("access_denied", _("The log-in was refused in the browser."))
        if authorization.status == DeviceAuthorization.Status.PENDING:
            if authorization.expired:
                raise DeviceLoginRefused("expired_token", _("The code expired; start again."))
            raise DeviceLoginRefused("authorization_pending", _("Waiting for confirmation in the browser."))
        authorization.status = DeviceAuthorization.Status.REDEEMED
        authorization.save(update_fields=["status"])
        try:
            _token, raw = api_token_create(
                user=authorization.user,
                name=authorization.client_name,
                expires_at=None,
                scope=authorization.scope,
                ip=ip,
                user_agent=user_agent,
                via="device_login",
            )
        except ValidationError as error:
            # The user holds the most tokens allowed (ACCOUNTS_MAX_API_TOKENS): the command line is told
            # why, and the code stays unredeemed (this transaction rolls back) until it expires.
            raise DeviceLoginRefused("limit_reached", " ".join(error.messages)) from error
        return raw


def device_logins_prune(*, now: datetime | None = None) -> int:
    """Delete the log-ins past their expiry, whatever their status; returns how many. Anyone may start
    one without signing in, so only this keeps the table small; an expired one serves no one (a pending
    or approved one is refused past ``expires_at``, a redeemed one's token lives on its own). Safe to
    run twice, and beside a poll: a row deleted under it reads as an unknown code."""
    now = now or timezone.now()
    deleted, _by_model = DeviceAuthorization.objects.filter(expires_at__lte=now).delete()
    return deleted
