"""Fixtures for privacy: the instances app's simulated fleet and money, storage's volumes."""

from __future__ import annotations

from instances.tests.conftest import catalogue, committed, rich_alice, small_fleet  # noqa: F401
from storage.tests.conftest import make_volume  # noqa: F401
