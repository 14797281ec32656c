"""Fixtures for privacy: the instances app's simulated fleet and money, storage's volumes, and the first
terms and privacy policy that migration 0002 seeds."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps as django_apps

from instances.tests.conftest import catalogue, committed, rich_alice, small_fleet  # noqa: F401
from privacy.selectors import in_force_forget
from storage.tests.conftest import make_volume  # noqa: F401

_FIRST_TEXTS = importlib.import_module("privacy.migrations.0002_first_terms_and_privacy_policy")


@pytest.fixture(autouse=True)
def first_legal_texts(request):
    """The texts in force as a fresh database has them. A transactional test earlier in the run empties
    every table when it ends, the rows that migrations wrote included; these tests start from the
    migrated state whatever ran before (seeding is idempotent)."""
    marker = request.node.get_closest_marker("django_db")
    transactional = bool(marker and marker.kwargs.get("transaction")) or {"transactional_db", "live_server"} & set(
        request.fixturenames
    )
    if not (marker or {"db", "transactional_db", "live_server"} & set(request.fixturenames)):
        return
    request.getfixturevalue("transactional_db" if transactional else "db")
    _FIRST_TEXTS.seed(django_apps, None)
    in_force_forget()  # a request before this test may have read the texts in force while there were none
