"""The API's rate limits, per credential: the account's and, where set, the token's own.

Two buckets for an authenticated request, each a sliding minute in the cache (DRF's history of
request times): the account's, shared by all its sessions and tokens (``User.api_rate_per_min``, which
staff set, or ``API_RATE_PER_MIN``), and, for a token with a limit of its own
(``APIToken.rate_per_min``), the token's. A token's limit narrows its account's and never widens it, so
one looping script cannot use up what its owner's other scripts and pages need, and no token gets more
than the account. Anonymous requests keep DRF's per-address ``AnonRateThrottle``. A refusal is DRF's 429
with ``Retry-After`` (the seconds until the oldest request in the window leaves it).
"""

from __future__ import annotations

import time

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle

from accounts.models import APIToken, User

WINDOW_S = 60


def account_rate_per_min(user: User) -> int:
    """The requests a minute an account's credentials may make together."""
    return user.api_rate_per_min or settings.API_RATE_PER_MIN


def token_rate_per_min(token: APIToken, user: User) -> int:
    """A token's limit: its own where set, never above its account's."""
    account = account_rate_per_min(user)
    return min(token.rate_per_min, account) if token.rate_per_min else account


class _PerMinute(SimpleRateThrottle):
    """DRF's sliding-window throttle with a rate chosen per request, not read from a settings table."""

    def __init__(self) -> None:  # the rate is the request's: nothing to read from THROTTLE_RATES
        self.rate = None

    def limit_for(self, request) -> tuple[str, int] | None:
        """(cache key, requests a minute), or None where this bucket does not apply."""
        raise NotImplementedError

    def allow_request(self, request, view) -> bool:
        found = self.limit_for(request)
        if found is None:
            return True
        self.key, self.num_requests = found
        self.duration = WINDOW_S
        self.history = self.cache.get(self.key, [])
        self.now = self.timer()
        while self.history and self.history[-1] <= self.now - self.duration:
            self.history.pop()
        if len(self.history) >= self.num_requests:
            return self.throttle_failure()
        return self.throttle_success()

    def get_cache_key(self, request, view) -> str | None:
        found = self.limit_for(request)
        return found[0] if found else None


class AccountRateThrottle(_PerMinute):
    """All of an account's sessions and tokens together."""

    def limit_for(self, request) -> tuple[str, int] | None:
        user = request.user
        if not (user and user.is_authenticated):
            return None
        return f"throttle_account_{user.pk}", account_rate_per_min(user)


class TokenRateThrottle(_PerMinute):
    """A token with a limit of its own, on top of its account's."""

    def limit_for(self, request) -> tuple[str, int] | None:
        token = request.auth
        if not isinstance(token, APIToken) or not token.rate_per_min:
            return None
        return f"throttle_token_{token.pk}", token_rate_per_min(token, request.user)


def _used(cache_key: str, now: float) -> int:
    """Requests counted in a bucket's current window (its history holds their times, newest first)."""
    return sum(1 for at in _PerMinute.cache.get(cache_key, []) if at > now - WINDOW_S)


def rate_limit_status(request) -> dict:
    """What the calling credential may still do this minute, for ``GET /api/v1/account/rate-limit/``.

    Read after this request's own throttles ran, so the request itself is counted."""
    now = time.time()  # the clock DRF's throttles keep their histories in
    account = AccountRateThrottle().limit_for(request)
    token = TokenRateThrottle().limit_for(request)
    status = {
        "window_s": WINDOW_S,
        "account_per_min": account[1],
        "account_remaining": max(0, account[1] - _used(account[0], now)),
        "token_per_min": None,
        "token_remaining": None,
    }
    if token is not None:
        status["token_per_min"] = token[1]
        status["token_remaining"] = max(0, token[1] - _used(token[0], now))
    return status
