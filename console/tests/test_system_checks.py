"""Django's system checks pass: `make run` and every management command run them before anything else,
and the test runner does not (a model's index that needs an app missing from INSTALLED_APPS once
stopped `make run` at its first migrate while every test passed)."""

from __future__ import annotations

import pytest
from django.core import checks


@pytest.mark.django_db
def test_the_system_checks_find_no_error():
    # With the database, as `migrate` runs them: index and field checks that depend on it run only so.
    found = checks.run_checks(include_deployment_checks=False, databases=["default"])
    errors = [m for m in found if m.level >= checks.ERROR]
    assert errors == [], "\n".join(f"{m.id} {m.obj}: {m.msg}" for m in errors)
