"""Helpers the apps' tests share (not imported by the console itself)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from django.db import connection


class Race(NamedTuple):
    """What the threads of a ``race`` got (``won, refused, errors = race(...)``): the calls' results, the
    refusals it expected as ``(k, exception)``, and the repr of anything else raised."""

    won: list[Any]
    refused: list[tuple[int, BaseException]]
    errors: list[str]


def race(
    work: Callable[[int], Any],
    *,
    threads: int,
    each: int = 1,
    refusals: tuple[type[BaseException], ...] = (),
    timeout: float = 120,
) -> Race:
    """Call ``work(k)`` from ``threads`` real threads released together by a barrier, ``each`` times per
    thread (``k`` numbers the calls: thread ``i``'s ``j``-th call is ``i * each + j``).

    For the tests of locks and compare-and-set updates on PostgreSQL (with
    ``django_db(transaction=True)``): each thread has its own database connection, closed when it
    ends. A call that raises one of ``refusals`` is a refusal the test expects (``Race.refused``); any
    other exception is an error (``Race.errors``, its repr), which a test asserts is empty.
    """
    barrier = threading.Barrier(threads)
    outcome = Race([], [], [])

    def racer(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            for j in range(each):
                k = i * each + j
                try:
                    outcome.won.append(work(k))
                except refusals as exc:
                    outcome.refused.append((k, exc))
        except Exception as exc:  # reported in outcome.errors
            outcome.errors.append(repr(exc))
        finally:
            connection.close()

    started = [threading.Thread(target=racer, args=(i,)) for i in range(threads)]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join(timeout=timeout)
    return outcome
