"""The user's language: chosen from the browser at sign-up, applied at each log-in, kept on the user.

Django picks a request's language from the ``django_language`` cookie, then the browser's
``Accept-Language`` (``LocaleMiddleware``). The user's ``language`` field is what workers use (they
have no request); at log-in it becomes the browser's choice too, through the same cookie the header's
language switch sets, so pages and e-mail agree. ``LanguageCookieMiddleware`` writes the cookie on the
response of the request that logged in (a signal cannot reach the response).
"""

from __future__ import annotations

from allauth.account.signals import user_signed_up
from django.conf import settings
from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.utils import translation


def language_supported(code: str | None) -> str:
    """``code`` as one of ``settings.LANGUAGES`` (``zh-CN`` → ``zh-hans``), or the site's default."""
    try:
        return translation.get_supported_language_variant(code or "")
    except LookupError:
        return settings.LANGUAGE_CODE


def language_apply(request: HttpRequest, language: str) -> None:
    """Show this request's answer in ``language`` and remember it in the browser's cookie."""
    translation.activate(language)
    request.LANGUAGE_CODE = language
    request._language_cookie = language


@receiver(user_logged_in, dispatch_uid="accounts.language.on_login")
def _on_login(sender, request, user, **kwargs) -> None:
    language = getattr(user, "language", "")
    if request is not None and language:
        language_apply(request, language)


def signup_language_set(*, request: HttpRequest, user) -> None:
    """A new account starts in the language its browser asked for (cookie, then Accept-Language)."""
    user.language = language_supported(translation.get_language_from_request(request))
    user.save(update_fields=["language"])


class LanguageCookieMiddleware:
    """Writes the language chosen during this request (log-in, the profile) into Django's cookie."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        language = getattr(request, "_language_cookie", None)
        if language:
            response.set_cookie(
                settings.LANGUAGE_COOKIE_NAME,
                language,
                max_age=settings.LANGUAGE_COOKIE_AGE,
                path=settings.LANGUAGE_COOKIE_PATH,
                domain=settings.LANGUAGE_COOKIE_DOMAIN,
                secure=settings.LANGUAGE_COOKIE_SECURE,
                httponly=settings.LANGUAGE_COOKIE_HTTPONLY,
                samesite=settings.LANGUAGE_COOKIE_SAMESITE,
            )
        return response


@receiver(user_signed_up, dispatch_uid="accounts.language.on_signup")
def _on_signup(sender, request, user, **kwargs) -> None:
    if request is not None:
        signup_language_set(request=request, user=user)
