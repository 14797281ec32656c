"""The instances app's fixtures (a small simulated fleet, the catalogue, money), for metrics' tests."""

from __future__ import annotations

from instances.tests.conftest import catalogue, rich_alice, small_fleet  # noqa: F401  (fixtures)
