"""Moving a row from one status to another: an explicit table of the allowed moves, and a
compare-and-set update that records the move in the same transaction.

Instances, volumes and top-up orders move this way::

    ALLOWED = transition_table({"pending": {"paid", "failed"}, "failed": {"paid"}, "paid": set()})

    moved = transition(
        model=Order, pk=order_id, table=ALLOWED, src="pending", dst="paid",
        changes={"paid_at": now},
        record=lambda: OrderEvent.objects.create(order_id=order_id, old="pending", new="paid"),
    )

The update filters on the old status, so of two workers making the same move exactly one moves the
row; the other gets ``False`` and returns quietly (healthchecks' and Saleor's pattern).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType

from django.db import models, transaction

# status → the statuses it may move to. A status with no row, or an empty one, moves nowhere.
TransitionTable = Mapping[str, frozenset[str]]


class InvalidTransition(Exception):
    """A programming error: the table does not allow this move."""

    def __init__(self, src: str, dst: str) -> None:
        super().__init__(f"{src} → {dst} is not an allowed transition")
        self.src, self.dst = src, dst


def transition_table(moves: Mapping[str, Iterable[str]]) -> TransitionTable:
    """``moves`` frozen: nobody adds a move to the table at run time."""
    return MappingProxyType({src: frozenset(dsts) for src, dsts in moves.items()})


def transition(
    *,
    model: type[models.Model],
    pk,
    table: TransitionTable,
    src: str,
    dst: str,
    changes: Mapping | None = None,
    record: Callable[[], object] | None = None,
    error: type[InvalidTransition] = InvalidTransition,
) -> bool:
    """Move row ``pk`` of ``model`` from status ``src`` to ``dst`` if it is still in ``src``.

    ``changes`` are other fields to set in the same update. ``record`` runs only when this call made
    the move, in the same transaction (it writes the event row, and whatever else entering ``dst``
    means): if it raises, the move is undone. Returns ``False`` when the row was not in ``src`` (another
    worker moved it first). Raises ``error`` (``InvalidTransition`` or a subclass) for a move the table
    does not allow, before touching the database.
    """
    if dst not in table.get(src, ()):
        raise error(src, dst)
    fields = {"status": dst, **(changes or {})}

    def update() -> int:
        # The ORM's compare-and-set: a fixed statement saved 3 % of a launch's CPU (bench/sql_gain.py),
        # under the 5 % that earns one (core.sql).
        return model._default_manager.filter(pk=pk, status=src).update(**fields)

    if record is None:
        return bool(update())
    with transaction.atomic():
        if not update():
            return False
        record()
    return True
