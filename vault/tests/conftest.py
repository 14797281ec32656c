"""Fixtures for the vault's tests: the instances app's catalogue and simulated fleet (instances that
choose secrets)."""

from __future__ import annotations

from instances.tests.conftest import catalogue, rich_alice, small_fleet, this_host  # noqa: F401
