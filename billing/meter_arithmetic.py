"""A meter's arithmetic: the whole seconds it bills and what they cost, rounded once.

Pure, no queries: the reads (``selectors``' runway) and the writes (``services``' settlement, the
tick) compute what is owed with the same two functions, so they can never disagree by a rounding.
"""

from __future__ import annotations

from datetime import datetime, timedelta


def amount_owed(*, price_fen: int, quantity: int, unit_seconds: int, seconds: int) -> int:
    """``round(price × quantity × seconds / unit_seconds)`` in integers, halves rounded up."""
    numerator = price_fen * quantity * seconds
    return (2 * numerator + unit_seconds) // (2 * unit_seconds)


def elapsed_seconds(*, start: datetime, end: datetime) -> int:
    """Whole seconds from ``start`` to ``end`` (floor, never negative): the unit a meter bills.

    Integer arithmetic on the timedelta, as the tick's SQL floors its epoch difference.
    """
    return max(0, (end - start) // timedelta(seconds=1))
