"""Pages ask a signed-in person to accept the legal texts in force before anything else.

After authentication (and staff's second factor): a person with a version to accept is sent to the
accept page from every page but a few (the page itself, the texts, log-out, the language switch, static
files). The API (``/api/``) is left to ``privacy.authentication``, which answers 403 JSON instead.
A person who joined after the versions in force is up to date without a query (the versions are kept per
process: ``privacy.selectors``); for an older account found up to date, the session remembers the
versions it accepted, so its later requests cost no query either.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import Resolver404, resolve, reverse
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django_htmx.http import HttpResponseClientRedirect

from privacy.selectors import documents_in_force_ids, documents_pending_for, documents_published_after_joining

SESSION_KEY = "privacy_accepted"
# Pages a person who has texts to accept may still open.
ALLOWED_URL_NAMES = frozenset(
    {"privacy_accept", "privacy_document", "account_logout", "set_language", "javascript-catalog", "healthz", "readyz"}
)
ALLOWED_PREFIXES = ("/api/", "/static/", "/accounts/2fa/", "/dev/mail/")


def accepted_mark(request: HttpRequest, ids: dict[str, int]) -> None:
    request.session[SESSION_KEY] = sorted(ids.values())


class TermsAcceptanceMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated or request.path.startswith(ALLOWED_PREFIXES):
            return self.get_response(request)
        if not documents_published_after_joining(user=user):
            return self.get_response(request)
        ids = documents_in_force_ids()
        if request.session.get(SESSION_KEY) == sorted(ids.values()):
            return self.get_response(request)
        if not documents_pending_for(user=user):
            accepted_mark(request, ids)
            return self.get_response(request)
        try:
            name = resolve(request.path_info).url_name
        except Resolver404:
            name = None
        if name in ALLOWED_URL_NAMES:
            return self.get_response(request)
        target = reverse("privacy_accept")
        following = request.get_full_path()
        if request.method == "GET" and url_has_allowed_host_and_scheme(following, allowed_hosts=None):
            target = f"{target}?{urlencode({'next': following})}" if following != "/" else target
        if getattr(request, "htmx", False):  # a partial: the whole page goes
            return HttpResponseClientRedirect(target)
        return redirect(target)
