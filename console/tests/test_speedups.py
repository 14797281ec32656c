"""The speed-ups on internals (``core.speedups``) run only where allowed and on versions checked."""

from __future__ import annotations

import logging

import pytest

from core import speedups
from core.speedups import SPEEDUPS, decide


@pytest.mark.parametrize("name", sorted(SPEEDUPS))
def test_each_runs_on_a_version_it_was_checked_on(name):
    low, _ = SPEEDUPS[name].verified
    made = decide(name, allowed=True, version=f"{low[0]}.{low[1]}.3")
    assert made.enabled and made.reason == ""


@pytest.mark.parametrize("name", sorted(SPEEDUPS))
def test_outside_its_range_it_falls_back_and_says_why(name):
    _, high = SPEEDUPS[name].verified
    made = decide(name, allowed=True, version=f"{high[0]}.{high[1]}.0")
    assert not made.enabled
    assert SPEEDUPS[name].package in made.reason and f"{high[0]}.{high[1]}.0 is installed" in made.reason


def test_django_6_1_is_in_the_range_of_the_handler_and_the_fixed_statements():
    assert decide("handlers", allowed=True, version="6.1.3").enabled
    assert decide("sql", allowed=True, version="6.1.3").enabled
    assert not decide("handlers", allowed=True, version="5.2.8").enabled
    assert not decide("sql", allowed=True, version="6.2a1").enabled


def test_its_setting_turns_it_off_whatever_the_version():
    made = decide("broker", allowed=False, version="5.7.0")
    assert not made.enabled and "CONSOLE_SPEEDUP_BROKER=0" in made.reason


def test_a_version_that_cannot_be_read_falls_back():
    assert not decide("sql", allowed=True, version=None).enabled
    assert not decide("sql", allowed=True, version="dev").enabled


def test_the_decision_is_logged_once_at_start_up_and_reported(settings, caplog):
    settings.CONSOLE_SPEEDUPS = {"handlers": False, "broker": True, "sql": True}
    speedups.decision.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="core.speedups"):
            assert not speedups.enabled("handlers")
            assert not speedups.enabled("handlers")
        messages = [r.getMessage() for r in caplog.records]
        assert (
            messages.count(
                "speed-up 'handlers' is off, stock behaviour used: turned off by its setting (CONSOLE_SPEEDUP_HANDLERS=0)"
            )
            == 1
        )
        assert speedups.report()["handlers"]["enabled"] is False
        assert set(speedups.report()) == set(SPEEDUPS)
    finally:
        speedups.decision.cache_clear()
