"""Billing's reads, scoped to the user who asks."""

from __future__ import annotations

from dataclasses import dataclass

from billing.models import Meter
from billing.services import balance_get


@dataclass(frozen=True)
class Runway:
    """How long the balance lasts at the current rate of spend."""

    balance_fen: int  # spendable now: trial credit plus paid money, less what open meters still owe
    burn_fen_per_hour: int  # what the user's open meters cost per hour together
    owed_fen: int  # used but not yet charged (settled at the next tick)

    @property
    def seconds(self) -> int | None:
        """Seconds until the balance is spent; ``None`` when nothing is running."""
        if self.burn_fen_per_hour <= 0:
            return None
        return max(0, self.balance_fen * 3600 // self.burn_fen_per_hour)


def runway_get(*, user, now=None) -> Runway:
    from django.utils import timezone

    from billing.services import amount_owed

    now = now or timezone.now()
    balance = balance_get(user=user)
    burn_numerator = 0  # fen × seconds-per-hour, summed exactly before one division
    owed = 0
    for meter in Meter.objects.filter(user=user, stopped_at__isnull=True).only(
        "price_fen", "quantity", "unit_seconds", "started_at", "charged_fen"
    ):
        burn_numerator += meter.price_fen * meter.quantity * 3600 * 10_000 // meter.unit_seconds
        seconds = max(0, int((now - meter.started_at).total_seconds()))
        owed += max(
            0,
            amount_owed(
                price_fen=meter.price_fen, quantity=meter.quantity, unit_seconds=meter.unit_seconds, seconds=seconds
            )
            - meter.charged_fen,
        )
    burn = (burn_numerator + 9_999) // 10_000
    return Runway(balance_fen=balance.total - owed, burn_fen_per_hour=burn, owed_fen=owed)
