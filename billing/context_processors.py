"""The low-balance banner's data, on every page of a signed-in user.

Lazy: the one query of ``runway_get`` (the balance and the open meters) runs only when a template
asks, and never for anonymous visitors.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.utils.functional import SimpleLazyObject

from billing import access
from billing.selectors import runway_get


@dataclass(frozen=True)
class LowBalance:
    seconds: int  # how long the balance lasts at the current rate
    burn_fen_per_hour: int
    balance_fen: int

    @property
    def exhausted(self) -> bool:
        return self.seconds <= 0


def _low_balance_for(user) -> LowBalance | None:
    runway = runway_get(user=user)
    threshold = int(getattr(settings, "BILLING_LOW_BALANCE_WARNING_S", 3600))
    seconds = runway.seconds
    if seconds is None or seconds >= threshold:  # nothing running, or enough money
        return None
    return LowBalance(seconds=seconds, burn_fen_per_hour=runway.burn_fen_per_hour, balance_fen=runway.balance_fen)


def low_balance(request) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    # The wallet the person acts on: in a team, the team's (billing.access), when their role shows it.
    if not access.allows(request, access.VIEW):
        return {}
    wallet = access.principal(request)
    return {"low_balance": SimpleLazyObject(lambda: _low_balance_for(wallet))}
