"""Values a process keeps for itself between requests, and one way to forget them all.

A few reads on the launch path ask the database for rows that almost never change (the catalogue,
whether a backend's nodes are known). The modules that keep such copies register how to forget them
here, so the test suite can start every test with none (a rolled-back test's rows must not outlive
it) without knowing where each copy lives.
"""

from __future__ import annotations

from collections.abc import Callable

_forgetters: list[Callable[[], None]] = []


def process_memo_register(forget: Callable[[], None]) -> Callable[[], None]:
    """Register ``forget`` (a function that empties one copy); returns it, so it can decorate."""
    _forgetters.append(forget)
    return forget


def process_memos_forget() -> None:
    """Empty every copy this process keeps: the next reads ask the database again."""
    for forget in _forgetters:
        forget()
