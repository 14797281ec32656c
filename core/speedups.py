"""The speed-ups that reach into other projects' internals, and the way back to stock behaviour.

Three parts of the console replace or bypass code of the libraries beneath it, because the stock path
cost a large share of a launch's CPU (``make bench``):

- ``handlers``: ``console.handlers.LaneASGIHandler`` replaces Django's ASGI request handling (it
  overrides ``ASGIHandler.handle`` and reads ``FileResponse`` internals);
- ``broker``: ``console.broker`` overrides kombu's private ``Channel._create_client``;
- ``sql``: ``core.sql`` writes a few statements by hand and builds model instances the way the ORM
  does inside (``Model.from_db``, each field's converters).

Each was written against, and checked on, the versions in ``SPEEDUPS``. A routine upgrade could break
one silently, so each is used only when (1) its setting allows it (``CONSOLE_SPEEDUPS``, one
environment variable each: ``CONSOLE_SPEEDUP_HANDLERS=0`` and so on) and (2) the installed library is
in the range it was verified on. Otherwise the stock behaviour is used and the reason is logged once
per process, at start-up: an upgrade makes the console slower, never wrong.

Widen a range only after reading the library's new code against the speed-up and running
``console/tests/test_speedups_fallback.py`` and the speed-up's own tests on it.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass
from importlib import metadata

from django.conf import settings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Speedup:
    name: str
    package: str  # the distribution whose internals it relies on
    verified: tuple[tuple[int, int], tuple[int, int]]  # [from, to) of (major, minor)
    relies_on: str  # what of that package it depends on: what to re-read before widening the range


SPEEDUPS: dict[str, Speedup] = {
    s.name: s
    for s in (
        # Read against 6.0.10 and 6.1.3 (6.1 rewrote ASGIHandler.handle around a TaskGroup; the parts
        # this handler calls, read_body, create_request, send_response and get_response, are unchanged).
        Speedup(
            "handlers",
            "django",
            ((6, 0), (6, 2)),
            "ASGIHandler.read_body/create_request/send_response, BaseHandler.load_middleware(is_async=False), "
            "HttpResponseBase._resource_closers and FileResponse.file_to_stream",
        ),
        Speedup("broker", "kombu", ((5, 7), (5, 8)), "kombu.transport.redis.Channel._create_client(asynchronous=…)"),
        # 6.1 added Model.from_db(…, *, fetch_mode=None): the positional call is unchanged.
        Speedup(
            "sql",
            "django",
            ((6, 0), (6, 2)),
            "Model.from_db, Field.get_col/get_db_converters/get_db_prep_save/pre_save, ops.get_db_converters",
        ),
    )
}


@dataclass(frozen=True)
class Decision:
    enabled: bool
    version: str | None
    reason: str  # why not, or "" when enabled


def _major_minor(version: str) -> tuple[int, int] | None:
    found = re.match(r"(\d+)\.(\d+)", version)
    return (int(found[1]), int(found[2])) if found else None


def _fmt(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def decide(name: str, *, allowed: bool, version: str | None) -> Decision:
    """Whether speed-up ``name`` runs, given its setting and the installed version of its package."""
    speedup = SPEEDUPS[name]
    low, high = speedup.verified
    if not allowed:
        return Decision(False, version, f"turned off by its setting (CONSOLE_SPEEDUP_{name.upper()}=0)")
    found = _major_minor(version) if version else None
    if found is None:
        return Decision(False, version, f"{speedup.package} {version or 'is not installed'}: version unknown")
    if not low <= found < high:
        return Decision(
            False,
            version,
            f"written for {speedup.package} {_fmt(low)} to before {_fmt(high)}, and {version} is installed: "
            f"stock behaviour until someone checks what it relies on ({speedup.relies_on})",
        )
    return Decision(True, version, "")


@functools.cache
def decision(name: str) -> Decision:
    """The decision for ``name`` in this process (made once; the fallback's reason logged once)."""
    speedup = SPEEDUPS[name]
    try:
        version = metadata.version(speedup.package)
    except metadata.PackageNotFoundError:
        version = None
    made = decide(name, allowed=bool(settings.CONSOLE_SPEEDUPS.get(name, True)), version=version)
    if not made.enabled:
        logger.warning("speed-up %r is off, stock behaviour used: %s", name, made.reason)
    return made


def enabled(name: str) -> bool:
    """Whether speed-up ``name`` is used in this process (see the module's docstring)."""
    return decision(name).enabled


def report() -> dict[str, dict]:
    """Each speed-up's decision, for ``make bench``'s record of the configuration it ran under."""
    return {
        name: {"enabled": d.enabled, "version": d.version, "reason": d.reason}
        for name in SPEEDUPS
        if (d := decision(name))
    }
