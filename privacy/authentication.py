"""The API's authentication classes, with the legal texts checked: a person who has not accepted the
versions in force is refused with 403 ``terms_not_accepted`` until they accept them in the console.

The API cannot show a page to accept, and an API call must not be taken for acceptance, so a script
stops with a message that says what to do (log in to the console once) rather than with a redirect it
cannot follow. Configured in ``REST_FRAMEWORK`` in place of the classes they extend.
"""

from __future__ import annotations

from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from drf_spectacular.authentication import SessionScheme
from rest_framework import exceptions

from accounts.two_factor import SessionAuthentication
from privacy.selectors import documents_pending_for
from teams.authentication import TeamTokenAuthentication


class TermsNotAccepted(exceptions.PermissionDenied):
    default_detail = _(
        "New terms of service or a new privacy policy are in force: log in to the console and accept them "
        "to go on using the API."
    )
    default_code = "terms_not_accepted"


def _check(user) -> None:
    if documents_pending_for(user=user):
        raise TermsNotAccepted(
            detail=f"{TermsNotAccepted.default_detail} ({reverse('privacy_accept')})", code="terms_not_accepted"
        )


class TermsTokenAuthentication(TeamTokenAuthentication):
    """Team-aware token authentication (teams.authentication), refusing a person with texts to accept."""

    def authenticate(self, request):
        found = super().authenticate(request)
        if found is not None:
            _check(found[0])
        return found


class TermsSessionAuthentication(SessionAuthentication):
    """The session (staff need their second factor: accounts.two_factor), refusing texts not accepted."""

    def authenticate(self, request):
        found = super().authenticate(request)
        if found is not None:
            _check(found[0])
        return found


class TermsSessionScheme(SessionScheme):
    """Documented as drf-spectacular documents DRF's own session (``cookieAuth``)."""

    target_class = "privacy.authentication.TermsSessionAuthentication"
