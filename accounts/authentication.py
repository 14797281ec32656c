"""REST API authentication with the console's API tokens (``Authorization: Bearer gpuc_…``).

A read-only token (``APIToken.Scope.READ``) is refused here, for any method but GET, HEAD and
OPTIONS, before a view or its permissions run. Doing it in the authentication class rather than in a
permission keeps it central: a view that sets its own ``permission_classes`` replaces the default
permissions, but every API view that accepts a token authenticates through this class. (Tokens work
nowhere else: pages, the instance proxy and device log-in's confirmation take only the session.)
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions

from accounts.models import APIToken

TOKEN_PREFIX = "gpuc_"  # noqa: S105 (a public marker, not a secret)


class ReadOnlyToken(exceptions.PermissionDenied):
    """403 ``read_only_token``: a read-only token asked to change something."""

    default_detail = _("This API token is read-only: it may only read (GET, HEAD, OPTIONS). Use a full-access token.")
    default_code = "read_only_token"


def token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def token_with_user(digest: str) -> APIToken | None:
    """The token with this digest and its (active) user, in one query. Through the ORM: a fixed
    statement (``core.sql``) saved 3.7–4.9 % of a launch's CPU in ``make bench`` on 2026-12-04
    (``bench/sql_gain.py``), under the 5 % that earns one."""
    return APIToken.objects.select_related("user").filter(digest=digest, user__is_active=True).first()


class APITokenAuthentication(authentication.BaseAuthentication):
    keywords = ("bearer", "token")

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].decode(errors="replace").lower() not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(_("Invalid Authorization header: expected 'Bearer <token>'."))
        raw = header[1].decode(errors="replace")
        token = token_with_user(token_digest(raw))
        now = timezone.now()
        if token is None or not token.is_active(now):
            raise exceptions.AuthenticationFailed(_("The API token is invalid, expired or revoked."))
        if token.read_only and request.method not in permissions.SAFE_METHODS:
            raise ReadOnlyToken()
        # One write per resolution interval, not per request: a busy client must not hammer the row.
        stale_before = now - settings.API_TOKEN_LAST_USED_RESOLUTION
        if token.last_used_at is None or token.last_used_at < stale_before:
            APIToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="api"'


class APITokenAuthenticationScheme(OpenApiAuthenticationExtension):
    """Describes the token scheme in the OpenAPI schema (a plain HTTP bearer token)."""

    target_class = "accounts.authentication.APITokenAuthentication"
    match_subclasses = True  # teams' TeamTokenAuthentication, the one configured, is the same scheme
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token created under Account → API tokens, e.g. `Bearer gpuc_…`. "
            "A read-only token may only use GET, HEAD and OPTIONS; anything else is refused with 403 "
            "`read_only_token`. A token scoped to a team acts on the team's account while its maker is a member; "
            "after that it is refused with 401.",
        }
