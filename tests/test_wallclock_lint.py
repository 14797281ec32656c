"""The guard `make test` runs (scripts/wallclock_lint.py, `make wallclock-check`, before pytest): wall-clock
limits under 2 s in tests, and timing assertions, are flagged unless the line says why; generous deadlines
and polls pass. The project's own tests are checked by that step, not here (parsing them all again
cost the suite about ten seconds)."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("wallclock_lint", ROOT / "scripts" / "wallclock_lint.py")
lint = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = lint  # dataclasses look their module up there
spec.loader.exec_module(lint)


def findings(source: str) -> list[str]:
    return [f.what for f in lint.check_source(textwrap.dedent(source), Path("t.py"))]


@pytest.mark.parametrize(
    "line",
    [
        "backend_for(api, REQUEST_TIMEOUT_S=0.3)",
        "httpx.get(url, timeout=0.5)",
        "settings.KUBERNETES_TIMEOUT_S = 1",
        "options = {'DEADLINE_S': 1.5}",
        "deadline = time.monotonic() + 1",
        "ready.wait(0.5)",
        "thread.join(1)",
        "expect(badge).to_have_text('Running', timeout=1500)",
        "page.set_default_timeout(1000)",
        "assert elapsed < GOAL_S",
        "assert time.monotonic() - started < 5",
        "assert 3 > took",
    ],
)
def test_a_short_limit_or_a_timing_assertion_is_flagged(line):
    assert findings(line), line


@pytest.mark.parametrize(
    "line",
    [
        "httpx.get(url, timeout=10)",
        "deadline = time.monotonic() + 60",
        "ready.wait(30)",
        "wait_until(check, timeout=60, interval=0.2)",  # a poll interval is not a limit
        "expect(badge).to_have_text('Running', timeout=10_000)",
        "asyncio.run(asyncio.wait_for(coro, timeout=10))",  # seconds, not Playwright's milliseconds
        "page.wait_for_timeout(50)",  # a pause, not a limit
        "settings.INSTANCES_REDRIVE_AFTER_S = 0",
        "assert meter.duration >= 0",
        "assert ELAPSED_LIMIT > 3",
    ],
)
def test_generous_limits_polls_and_non_limits_pass(line):
    assert findings(line) == [], line


def test_a_reason_on_the_line_or_above_it_lets_a_short_limit_stay():
    assert findings("probe(timeout_s=1)  # wall-clock: only the verb is checked, not what it hears") == []
    assert (
        findings(
            """
        # wall-clock: the server is held silent, so the timeout fires however slow the machine is
        backend_for(api, REQUEST_TIMEOUT_S=0.3)
        """
        )
        == []
    )
    assert findings(
        """
        # a comment that gives no reason
        backend_for(api, REQUEST_TIMEOUT_S=0.3)
        """
    )
